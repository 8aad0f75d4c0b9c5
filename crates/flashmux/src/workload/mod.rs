//! Workloads: what tenants ask of the device. fio job files are the first-class input; the
//! simulator drives their generators in time (iodepth, rates, think time, runtime).

pub mod filebench;
pub mod fio;
pub mod personality;
pub mod trace;
