//! SSP's admission: the virt-template-validator.

pub mod template_validator;
