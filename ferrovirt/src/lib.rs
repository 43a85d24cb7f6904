//! Ferrovirt's components as one library, which the `ferrovirt` binary dispatches its
//! subcommands to, one module each, grouped by family:
//!
//! - [`virtctl`]: virtctl's verbs (start, stop, console, vnc, port-forward, ssh, create vm, ...);
//! - [`upload`]: `image-upload`, the upload proxy, the upload server pod, upload tokens;
//! - [`storage`]: the CSI driver, CDI's controllers, `import`, the importer and clone pods;
//! - [`kubevirt`]: virt-api, virt-controller, virt-handler, virt-launcher, `vmi run`;
//! - [`install_operators`]: the install operators on a cluster (CDI, HPP, HCO, SSP, network
//!   addons, KubeVirt) and HCO's CLI download server;
//! - [`webhooks`]: the AdmissionReview framing and the webhook servers and plugins;
//! - [`network`]: the MAC pool and bridge-marker;
//! - [`templates`]: `process` and `processedtemplates`;
//! - [`platform`]: `up` and `down`, the single-machine control plane;
//! - [`tasks`]: `task NAME`, the KubeVirt tekton tasks;
//! - [`cluster`]: the client, shared Secrets, caBundles and front proxy of components on a
//!   cluster. The paths and variables a pod is run with are `api::pod_contract`'s.

pub mod cluster;
pub mod install_operators;
pub mod kubevirt;
pub mod network;
pub mod platform;
pub mod storage;
pub mod tasks;
pub mod templates;
pub mod upload;
pub mod virtctl;
pub mod webhooks;
