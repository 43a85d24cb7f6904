//! The HostPathProvisioner operator on `ferrovirt up`: the CR's storage pools are served by
//! the platform's running CSI driver (through its store), added and removed without a
//! restart. Pools added this way are kept in the CSI state directory, so the driver reopens
//! them, and serves their volumes, at the next start before the operator runs again.

use standalone::control_plane::ControlPlane;

/// Starts the HostPathProvisioner controller against the platform's API server and store.
pub fn start(control_plane: &ControlPlane) {
    let client = control_plane.client.clone();
    let store = control_plane.storage.clone();
    tokio::spawn(operators::install::hpp::run(client, store));
}
