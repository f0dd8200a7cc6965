//! Queueing models parameterised by measured service demands (AutoPerf
//! sections 1 and 4: demands are measured so that models can extrapolate
//! to what was not tested).
//!
//! - `mva`: mean value analysis of closed networks — exact single-class
//!   with multi-server stations, exact and Schweitzer multi-class.

pub mod mva;
