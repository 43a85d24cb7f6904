//! HCO's admission: its webhook's own checks of a HyperConverged on create and update.

pub mod validate;
