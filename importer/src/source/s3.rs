//! S3 and S3-compatible object stores as a source: `s3://bucket/key` (path-style against an
//! endpoint, AWS by default) or an `http(s)://` object URL, path-style or virtual-hosted
//! (`https://bucket.s3.region.amazonaws.com/key`). Requests are signed with AWS Signature
//! Version 4 when credentials are given, and otherwise go out anonymously (public objects);
//! everything else (retries, Range resume, random access) is the HTTP source's.
//!
//! SigV4 is written here rather than taken from the AWS SDK: a signed GET is forty lines,
//! the SDK is hundreds of crates.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, KeyInit, Mac};
use reqwest::Url;
use reqwest::header::{HeaderName, HeaderValue};
use sha2::{Digest, Sha256};

use super::OpenedSource;
use super::http::{self, Credentials, HttpOptions, RequestSigner};
use crate::error::ImportError;

const DEFAULT_ENDPOINT: &str = "https://s3.amazonaws.com";
const DEFAULT_REGION: &str = "us-east-1";
/// The payload hash of a GET: S3 accepts this instead of hashing an empty body.
const UNSIGNED_PAYLOAD: &str = "UNSIGNED-PAYLOAD";

/// Where the object store is.
#[derive(Debug, Clone, Default)]
pub struct S3Options {
    /// The endpoint for `s3://` sources (e.g. `http://127.0.0.1:9000`); AWS when unset.
    pub endpoint: Option<String>,
    /// The signing region; taken from an AWS host name, else `us-east-1`.
    pub region: Option<String>,
}

/// The object's URL and the region to sign for.
pub fn object_url(source: &str, options: &S3Options) -> Result<(Url, String), ImportError> {
    let invalid = |why: &str| ImportError::InvalidSource(source.to_string(), why.to_string());
    let url = match source.strip_prefix("s3://") {
        Some(rest) => {
            let (bucket, key) = rest
                .split_once('/')
                .ok_or_else(|| invalid("expected s3://BUCKET/KEY"))?;
            if bucket.is_empty() || key.is_empty() {
                return Err(invalid("expected s3://BUCKET/KEY"));
            }
            let endpoint = options
                .endpoint
                .as_deref()
                .unwrap_or(DEFAULT_ENDPOINT)
                .trim_end_matches('/');
            Url::parse(&format!("{endpoint}/{bucket}/{key}"))
                .map_err(|e| invalid(&e.to_string()))?
        }
        None => Url::parse(source).map_err(|e| invalid(&e.to_string()))?,
    };
    let region = options
        .region
        .clone()
        .or_else(|| aws_region(&url))
        .unwrap_or_else(|| DEFAULT_REGION.to_string());
    Ok((url, region))
}

/// The region in an AWS host name: `s3.eu-west-1.amazonaws.com`, `b.s3-eu-west-1.amazonaws.com`.
fn aws_region(url: &Url) -> Option<String> {
    let host = url.host_str()?.strip_suffix(".amazonaws.com")?;
    let labels: Vec<&str> = host.split('.').collect();
    labels
        .iter()
        .enumerate()
        .find_map(|(i, label)| match *label {
            "s3" => labels.get(i + 1).map(|r| r.to_string()),
            l => l.strip_prefix("s3-").map(str::to_string),
        })
}

/// Opens the object: an HTTP source whose requests carry SigV4 headers.
pub async fn open(
    source: &str,
    options: &HttpOptions,
    s3: &S3Options,
) -> Result<OpenedSource, ImportError> {
    let (url, region) = object_url(source, s3)?;
    let mut http_options = options.clone();
    if let Some(credentials) = http_options.credentials.take() {
        http_options.signer = Some(Arc::new(SigV4 {
            credentials,
            region,
        }));
    }
    http::open(url.as_str(), &http_options).await
}

/// AWS Signature Version 4 for S3 GETs.
#[derive(Debug)]
pub struct SigV4 {
    pub credentials: Credentials,
    pub region: String,
}

impl RequestSigner for SigV4 {
    fn sign(&self, method: &str, url: &Url) -> Vec<(HeaderName, HeaderValue)> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let amz_date = amz_date(now);
        let host = host_header(url);
        let signed = [
            ("host", host.as_str()),
            ("x-amz-content-sha256", UNSIGNED_PAYLOAD),
            ("x-amz-date", &amz_date),
        ];
        let authorization = self.authorization(method, url, &signed, UNSIGNED_PAYLOAD, &amz_date);
        [
            ("x-amz-date", amz_date),
            ("x-amz-content-sha256", UNSIGNED_PAYLOAD.to_string()),
            ("authorization", authorization),
        ]
        .into_iter()
        .filter_map(|(name, value)| {
            Some((
                HeaderName::from_static(name),
                HeaderValue::from_str(&value).ok()?,
            ))
        })
        .collect()
    }
}

impl SigV4 {
    /// The `Authorization` header over `headers` (lower-case names, sorted by name).
    pub fn authorization(
        &self,
        method: &str,
        url: &Url,
        headers: &[(&str, &str)],
        payload_hash: &str,
        amz_date: &str,
    ) -> String {
        let date = &amz_date[..8];
        let scope = format!("{date}/{}/s3/aws4_request", self.region);
        let canonical_headers: String = headers
            .iter()
            .map(|(n, v)| format!("{n}:{}\n", v.trim()))
            .collect();
        let signed_headers = headers
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(";");
        let canonical_request = format!(
            "{method}\n{}\n{}\n{canonical_headers}\n{signed_headers}\n{payload_hash}",
            canonical_path(url),
            canonical_query(url),
        );
        let string_to_sign = format!(
            "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
            hex::encode(Sha256::digest(canonical_request.as_bytes()))
        );
        let mut key = hmac(
            format!("AWS4{}", self.credentials.password).as_bytes(),
            date.as_bytes(),
        );
        for part in [self.region.as_str(), "s3", "aws4_request"] {
            key = hmac(&key, part.as_bytes());
        }
        let signature = hex::encode(hmac(&key, string_to_sign.as_bytes()));
        format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
            self.credentials.username
        )
    }
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn host_header(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    }
}

/// The path, each byte outside RFC 3986's unreserved set percent-encoded once ('/' kept).
fn canonical_path(url: &Url) -> String {
    let decoded = percent_decode(url.path());
    let mut out = String::new();
    for &b in &decoded {
        if b.is_ascii_alphanumeric() || b"-_.~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Query parameters sorted by name (GETs of objects normally have none).
fn canonical_query(url: &Url) -> String {
    let mut pairs: Vec<(String, String)> = url
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// `YYYYMMDDTHHMMSSZ` for seconds since the epoch (UTC; civil-from-days conversion).
fn amz_date(secs: u64) -> String {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AWS's published example "GET Object" (Signature Version 4, header-based auth).
    #[test]
    fn matches_the_aws_get_object_example() {
        let signer = SigV4 {
            credentials: Credentials {
                username: "AKIAIOSFODNN7EXAMPLE".into(),
                password: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
            },
            region: "us-east-1".into(),
        };
        let url = Url::parse("https://examplebucket.s3.amazonaws.com/test.txt").unwrap();
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let headers = [
            ("host", "examplebucket.s3.amazonaws.com"),
            ("range", "bytes=0-9"),
            ("x-amz-content-sha256", empty),
            ("x-amz-date", "20130524T000000Z"),
        ];
        assert_eq!(
            signer.authorization("GET", &url, &headers, empty, "20130524T000000Z"),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, \
             SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, \
             Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
    }

    #[test]
    fn dates_and_urls() {
        assert_eq!(amz_date(1_369_353_600), "20130524T000000Z");
        assert_eq!(amz_date(951_782_400 + 3661), "20000229T010101Z");
        let (url, region) =
            object_url("s3://bucket/dir/disk.qcow2", &S3Options::default()).unwrap();
        assert_eq!(
            url.as_str(),
            "https://s3.amazonaws.com/bucket/dir/disk.qcow2"
        );
        assert_eq!(region, "us-east-1");
        let (_, region) = object_url(
            "https://b.s3.eu-west-1.amazonaws.com/k",
            &S3Options::default(),
        )
        .unwrap();
        assert_eq!(region, "eu-west-1");
        assert_eq!(
            canonical_path(&Url::parse("http://h/b/a b+c:d").unwrap()),
            "/b/a%20b%2Bc%3Ad"
        );
        assert!(object_url("s3://bucket", &S3Options::default()).is_err());
    }
}
