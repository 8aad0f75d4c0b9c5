//! The ids the host machine passes around, each its own type, and a vector indexed by one.
//!
//! Every part of the machine is a slab: hardware threads, software threads, mutexes, processes,
//! VMs, their vCPUs, virtqueues and I/O threads are numbered from 0 in the order they are built,
//! globally across VMs (VM 1's first vCPU follows VM 0's last). An id is that number in a
//! newtype, so a vCPU number cannot index the threads, and "none" is an `Option`, not a sentinel.
//!
//! Example: two VMs of 2 vCPUs in `per-vcpu-threads` give vCPUs 0..4, virtqueues 0..4, I/O
//! threads 0..4 and mutexes 0..4; VM 1's vCPU 0 is `VcpuId(2)`, and its software thread is
//! `ThreadId(4)` (threads are numbered in build order: VM 0's 2 vCPUs and 2 I/O threads first).
//!
//! Requests, jobs and tenants use the simulator's own ids ([`ReqId`], [`JobId`], [`TenantId`]).

use crate::units::{JobId, ReqId};
use std::marker::PhantomData;
use std::ops::{Index, IndexMut};

/// An id that is an index into one slab.
pub trait Idx: Copy + Eq + std::fmt::Debug {
    fn from_index(i: usize) -> Self;
    fn index(self) -> usize;
}

/// `Idx` for an id newtype over `$inner`: an index past the type's width is refused.
macro_rules! impl_idx {
    ($name:ident, $inner:ty) => {
        impl Idx for $name {
            fn from_index(i: usize) -> Self {
                assert!(i <= <$inner>::MAX as usize, concat!(stringify!($name), " {} out of range"), i);
                $name(i as $inner)
            }
            fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

macro_rules! virt_id {
    ($(#[$m:meta])* $name:ident, $inner:ty) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
        pub struct $name(pub $inner);
        impl_idx!($name, $inner);
    };
}

virt_id!(
    /// A software thread: a process, a vCPU or an I/O (polling, emulation) thread.
    ThreadId, u32);
virt_id!(
    /// A hardware thread of the host CPU (core × threads per core + thread); also the blk-mq
    /// software queue a request submitted from it goes to.
    HwThreadId, u16);
virt_id!(
    /// A FIFO mutex (one per virtqueue).
    LockId, u32);
virt_id!(
    /// A bare-metal process: process i runs job i.
    ProcId, u32);
virt_id!(
    /// A VM: one per tenant, in tenant order.
    VmId, u32);
virt_id!(
    /// A vCPU, numbered across all VMs.
    VcpuId, u32);
virt_id!(
    /// A virtqueue, numbered across all VMs.
    VqId, u32);
virt_id!(
    /// An I/O thread (or polling, or emulation thread), numbered across all VMs.
    IoThreadId, u32);

impl_idx!(ReqId, u32);
impl_idx!(JobId, u32);

/// A `Vec` indexed by one kind of id.
pub struct IdVec<I, T> {
    v: Vec<T>,
    _id: PhantomData<I>,
}

impl<I: Idx, T> IdVec<I, T> {
    pub fn new() -> Self {
        IdVec { v: Vec::new(), _id: PhantomData }
    }

    /// Appends `x` and returns its id.
    pub fn push(&mut self, x: T) -> I {
        self.v.push(x);
        I::from_index(self.v.len() - 1)
    }

    /// The id the next `push` returns.
    pub fn next_id(&self) -> I {
        I::from_index(self.v.len())
    }

    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.v.len()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.v.iter()
    }

    pub fn ids(&self) -> impl Iterator<Item = I> {
        (0..self.v.len()).map(I::from_index)
    }

    pub fn iter_enumerated(&self) -> impl Iterator<Item = (I, &T)> {
        self.v.iter().enumerate().map(|(i, x)| (I::from_index(i), x))
    }
}

impl<I: Idx, T: Clone> IdVec<I, T> {
    /// Grows the vector with `x` so that `id` is in it.
    pub fn grow_to(&mut self, id: I, x: T) {
        if self.v.len() <= id.index() {
            self.v.resize(id.index() + 1, x);
        }
    }
}

impl<I: Idx, T> Default for IdVec<I, T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<I: Idx, T> FromIterator<T> for IdVec<I, T> {
    fn from_iter<It: IntoIterator<Item = T>>(it: It) -> Self {
        IdVec { v: it.into_iter().collect(), _id: PhantomData }
    }
}

impl<I: Idx, T> Index<I> for IdVec<I, T> {
    type Output = T;
    fn index(&self, i: I) -> &T {
        &self.v[i.index()]
    }
}

impl<I: Idx, T> IndexMut<I> for IdVec<I, T> {
    fn index_mut(&mut self, i: I) -> &mut T {
        &mut self.v[i.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idvec_hands_out_ids_in_order_and_indexes_by_them() {
        let mut v: IdVec<VcpuId, &str> = IdVec::new();
        assert_eq!(v.next_id(), VcpuId(0));
        assert_eq!(v.push("a"), VcpuId(0));
        assert_eq!(v.push("b"), VcpuId(1));
        assert_eq!(v[VcpuId(1)], "b");
        v[VcpuId(0)] = "c";
        assert_eq!(v.iter_enumerated().collect::<Vec<_>>(), vec![(VcpuId(0), &"c"), (VcpuId(1), &"b")]);
        let mut r: IdVec<ReqId, u8> = IdVec::new();
        r.grow_to(ReqId(3), 7);
        assert_eq!(r.len(), 4);
        r.grow_to(ReqId(1), 9);
        assert_eq!(r.len(), 4, "growing to an id it holds changes nothing");
    }

    #[test]
    #[should_panic(expected = "HwThreadId 65536 out of range")]
    fn an_id_past_its_width_is_refused() {
        HwThreadId::from_index(1 << 16);
    }
}
