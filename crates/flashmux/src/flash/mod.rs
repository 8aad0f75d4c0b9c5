//! The flash array: geometry (channels, chips, dies, planes, blocks, pages), operation timing, and
//! the busy-time bookkeeping of the shared resources (dies and channels) that makes parallelism and
//! contention real.

mod geometry;
mod timeline;

pub use geometry::{Geometry, GeometryError, Multiplane, Timing};
pub use timeline::{Engine, Timeline};
