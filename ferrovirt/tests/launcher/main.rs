//! VMIs with no platform, one binary: `ferrovirt vmi run` and the launcher's control socket,
//! booting real guests.

#[path = "../guest/mod.rs"]
mod guest;
mod virt_launcher;
mod vmi_run;
