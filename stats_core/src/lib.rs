//! PyO3 shims for hofcat's statistics kernels.
//!
//! Each algorithm lives in its own module as a plain Rust function over slices, testable with
//! `cargo test` without Python; the `#[pyfunction]`s (`kendall.rs`, `py.rs`) only convert arguments and
//! release the GIL.
use pyo3::prelude::*;

pub mod simd;

pub mod bootstrap;
#[cfg(target_arch = "x86_64")]
pub mod cell_screen_vnni;
pub mod cell_sums;
pub mod cluster;
pub mod factored;
pub mod kendall;
pub mod matrix;
pub mod observed;
pub mod pdist;
pub mod permanova;
pub mod permdisp;
pub mod permute;
mod py;
pub mod screen;
#[cfg(target_arch = "x86_64")]
pub mod screen_vnni;

/// The private compiled module `stats_core._native`; only `stats_core/_backend.py` imports it.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("build_profile", if cfg!(debug_assertions) { "debug" } else { "release" })?;
    kendall::register(m)?;
    py::register(m)?;
    cell_sums::register(m)?;
    Ok(())
}
