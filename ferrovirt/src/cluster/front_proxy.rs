//! Requests that kube-aggregator forwards to an aggregated API server (virt-api's
//! subresources, CDI's UploadTokenRequest): the front proxy proves itself with a client
//! certificate from the request-header CA of ConfigMap
//! `kube-system/extension-apiserver-authentication` and names the user in headers; the
//! server then asks the API server, with a SubjectAccessReview, whether that user may.

use std::collections::BTreeMap;

use anyhow::Context;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kube::{Api, Client};
use uploadproxy::tls::Peer;

const AUTHENTICATION_CONFIG_MAP: (&str, &str) =
    ("kube-system", "extension-apiserver-authentication");

/// How kube-aggregator identifies itself and the user it forwards, from ConfigMap
/// `kube-system/extension-apiserver-authentication` as kube-apiserver publishes it.
#[derive(Debug)]
pub struct FrontProxy {
    pub roots: rustls::RootCertStore,
    /// The common names its client certificate may have (any, when empty).
    allowed_names: Vec<String>,
    username_headers: Vec<String>,
    group_headers: Vec<String>,
    extra_prefixes: Vec<String>,
}

impl FrontProxy {
    pub async fn read(client: &Client) -> anyhow::Result<FrontProxy> {
        let (namespace, name) = AUTHENTICATION_CONFIG_MAP;
        let map = Api::<ConfigMap>::namespaced(client.clone(), namespace)
            .get(name)
            .await
            .with_context(|| format!("reading ConfigMap {namespace}/{name}"))?;
        Self::from_data(&map.data.unwrap_or_default())
            .with_context(|| format!("ConfigMap {namespace}/{name}"))
    }

    fn from_data(data: &BTreeMap<String, String>) -> anyhow::Result<FrontProxy> {
        let ca = data
            .get("requestheader-client-ca-file")
            .context("no requestheader-client-ca-file: the API server has no front proxy")?;
        let list = |key: &str| -> anyhow::Result<Vec<String>> {
            match data.get(key) {
                Some(text) => {
                    serde_json::from_str(text).with_context(|| format!("{key}: {text:?}"))
                }
                None => Ok(Vec::new()),
            }
        };
        Ok(FrontProxy {
            roots: uploadproxy::tls::roots_from_pem(ca.as_bytes())?,
            allowed_names: list("requestheader-allowed-names")?,
            username_headers: list("requestheader-username-headers")?,
            group_headers: list("requestheader-group-headers")?,
            extra_prefixes: list("requestheader-extra-headers-prefix")?,
        })
    }

    /// The user a request speaks for, when it came from the front proxy.
    pub fn user(&self, peer: &Peer, headers: &hyper::HeaderMap) -> Option<RemoteUser> {
        let name = peer.common_name.as_ref()?;
        if !self.allowed_names.is_empty() && !self.allowed_names.contains(name) {
            return None;
        }
        let values = |header: &String| {
            headers
                .get_all(header.as_str())
                .iter()
                .filter_map(|v| v.to_str().ok().map(str::to_owned))
                .collect::<Vec<_>>()
        };
        let username = self
            .username_headers
            .iter()
            .find_map(|h| values(h).into_iter().next())?;
        let groups = self.group_headers.iter().flat_map(values).collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (header, value) in headers {
            let header = header.as_str();
            let key = self.extra_prefixes.iter().find_map(|prefix| {
                header
                    .get(..prefix.len())
                    .filter(|p| p.eq_ignore_ascii_case(prefix))
                    .map(|_| &header[prefix.len()..])
            });
            if let (Some(key), Ok(value)) = (key, value.to_str()) {
                extra
                    .entry(key.to_owned())
                    .or_default()
                    .push(value.to_owned());
            }
        }
        Some(RemoteUser {
            username,
            groups,
            extra,
        })
    }
}

/// The user kube-aggregator forwarded a request for.
#[derive(Debug, PartialEq)]
pub struct RemoteUser {
    pub username: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// Whether `user` may do what `attributes` name, by the API server's SubjectAccessReview.
pub async fn may(
    client: &Client,
    user: &RemoteUser,
    attributes: ResourceAttributes,
) -> Result<bool, kube::Error> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.username.clone()),
            groups: Some(user.groups.clone()),
            extra: Some(user.extra.clone()),
            resource_attributes: Some(attributes),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn front_proxy() -> FrontProxy {
        let ca = operators::certs::CertificateAuthority::generate("front-proxy-ca").expect("a CA");
        let data = BTreeMap::from([
            (
                "requestheader-client-ca-file".to_owned(),
                ca.cert_pem().to_owned(),
            ),
            (
                "requestheader-allowed-names".to_owned(),
                r#"["front-proxy-client"]"#.to_owned(),
            ),
            (
                "requestheader-username-headers".to_owned(),
                r#"["X-Remote-User"]"#.to_owned(),
            ),
            (
                "requestheader-group-headers".to_owned(),
                r#"["X-Remote-Group"]"#.to_owned(),
            ),
            (
                "requestheader-extra-headers-prefix".to_owned(),
                r#"["X-Remote-Extra-"]"#.to_owned(),
            ),
        ]);
        FrontProxy::from_data(&data).expect("the ConfigMap's data")
    }

    fn peer(common_name: Option<&str>) -> Peer {
        Peer {
            addr: "127.0.0.1:1".parse().expect("an address"),
            common_name: common_name.map(str::to_owned),
        }
    }

    #[test]
    fn the_front_proxy_names_the_user_its_groups_and_extras() {
        let proxy = front_proxy();
        let mut headers = hyper::HeaderMap::new();
        headers.insert("x-remote-user", "alice".parse().expect("a value"));
        headers.append("x-remote-group", "devs".parse().expect("a value"));
        headers.append(
            "x-remote-group",
            "system:authenticated".parse().expect("a value"),
        );
        headers.append("x-remote-extra-scopes", "a".parse().expect("a value"));
        let user = proxy.user(&peer(Some("front-proxy-client")), &headers);
        assert_eq!(
            user,
            Some(RemoteUser {
                username: "alice".into(),
                groups: vec!["devs".into(), "system:authenticated".into()],
                extra: BTreeMap::from([("scopes".into(), vec!["a".into()])]),
            })
        );
        // No certificate, another name, or no user header: not the front proxy's request.
        assert_eq!(proxy.user(&peer(None), &headers), None);
        assert_eq!(proxy.user(&peer(Some("mallory")), &headers), None);
        assert_eq!(
            proxy.user(&peer(Some("front-proxy-client")), &hyper::HeaderMap::new()),
            None
        );
    }

    #[test]
    fn a_configmap_without_the_request_header_ca_is_refused_by_name() {
        let err = FrontProxy::from_data(&BTreeMap::new()).expect_err("no CA");
        assert!(
            err.to_string().contains("requestheader-client-ca-file"),
            "{err}"
        );
        let mut data = BTreeMap::from([(
            "requestheader-client-ca-file".to_owned(),
            operators::certs::CertificateAuthority::generate("x")
                .expect("a CA")
                .cert_pem()
                .to_owned(),
        )]);
        data.insert(
            "requestheader-allowed-names".into(),
            "front-proxy-client".into(),
        );
        let err = FrontProxy::from_data(&data).expect_err("not a JSON list");
        assert!(
            format!("{err:#}").contains("requestheader-allowed-names"),
            "{err:#}"
        );
    }
}
