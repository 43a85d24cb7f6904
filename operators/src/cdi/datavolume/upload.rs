//! What an upload server pod needs besides itself: the service `cdi-upload-<pvc>` the proxy
//! reaches it through, the Secret of the same name with its serving certificate, and the
//! ConfigMap with the CA bundle of the proxy's client certificate. The Secret and ConfigMap
//! are made here only when the controller holds the upload CAs (standalone); on a cluster
//! whoever holds them (CDI's operator) provides them.

use std::collections::BTreeMap;

use api::cdi::DataVolume;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Secret, Service};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Resource, ResourceExt};

use super::context::{Context, Error};
use super::keys::CDI_LABEL;
use super::pod::{self, upload_pod_name};

/// The DNS names a PVC's upload server answers to (its service's names).
pub fn server_names(namespace: &str, pvc: &str) -> Vec<String> {
    let service = upload_pod_name(pvc);
    vec![
        service.clone(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// Creates what the upload server of `pvc` needs that does not exist yet.
pub async fn ensure_upload_server_prerequisites(
    ctx: &Context,
    dv: &DataVolume,
    pvc: &PersistentVolumeClaim,
    namespace: &str,
) -> Result<(), Error> {
    let name = upload_pod_name(&pvc.name_any());
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), namespace);
    if services.get_opt(&name).await?.is_none() {
        services
            .create(&PostParams::default(), &pod::upload_service(dv, pvc))
            .await?;
    }
    let Some(certificates) = &ctx.config.upload_certificates else {
        return Ok(());
    };
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    if secrets.get_opt(&name).await?.is_none() {
        let issued = certificates
            .server_ca
            .issue_server(&name, &server_names(namespace, &pvc.name_any()))
            .map_err(|e| Error::Certificate(e.to_string()))?;
        let data: BTreeMap<String, ByteString> = [
            (
                "tls.crt".to_string(),
                ByteString(issued.cert_pem.into_bytes()),
            ),
            (
                "tls.key".to_string(),
                ByteString(issued.key_pem.into_bytes()),
            ),
        ]
        .into();
        let secret = Secret {
            metadata: owned_meta(&name, namespace, pvc),
            data: Some(data),
            type_: Some("kubernetes.io/tls".to_string()),
            ..Default::default()
        };
        create_unless_exists(&secrets, &secret).await?;
    }
    let maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), namespace);
    let bundle_name = &ctx.config.upload_client_ca_config_map;
    if maps.get_opt(bundle_name).await?.is_none() {
        let map = ConfigMap {
            metadata: ObjectMeta {
                name: Some(bundle_name.clone()),
                namespace: Some(namespace.to_string()),
                labels: Some([(CDI_LABEL.0.to_string(), CDI_LABEL.1.to_string())].into()),
                ..Default::default()
            },
            data: Some(
                [(
                    super::pod::CA_BUNDLE_KEY.to_string(),
                    certificates.client_ca_bundle.clone(),
                )]
                .into(),
            ),
            ..Default::default()
        };
        create_unless_exists(&maps, &map).await?;
    }
    Ok(())
}

/// Metadata of an object owned by the PVC, so it goes when the PVC goes.
fn owned_meta(name: &str, namespace: &str, pvc: &PersistentVolumeClaim) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(namespace.to_string()),
        labels: Some([(CDI_LABEL.0.to_string(), CDI_LABEL.1.to_string())].into()),
        owner_references: pvc.owner_ref(&()).map(|owner| vec![owner]),
        ..Default::default()
    }
}

async fn create_unless_exists<K>(api: &Api<K>, object: &K) -> Result<(), Error>
where
    K: Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(err) => Err(err.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_are_the_service_names() {
        let names = server_names("ns", "disk");
        assert_eq!(names[0], "cdi-upload-disk");
        assert!(names.contains(&"cdi-upload-disk.ns.svc".to_string()));
    }
}
