//! `ferrovirt upload-server`: a drop-in for CDI's `cdi-uploadserver` container. It reads the
//! same environment (LISTEN_ADDRESS, LISTEN_PORT, DESTINATION, TLS_CERT_FILE, TLS_KEY_FILE,
//! CLIENT_CERT_FILE, CLIENT_NAME, UPLOAD_IMAGE_SIZE, FILESYSTEM_OVERHEAD, PREALLOCATION,
//! DEADLINE), serves one upload over HTTPS to the proxy's client certificate, and exits once
//! the upload is complete, leaving CDI's termination message ("Upload Complete"). Run by the
//! local node agent, its paths are under `FERROVIRT_POD_ROOT`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use api::cdi::pod_contract::env::{ProcessEnv, UploadServerEnv};
use api::cdi::pod_contract::{
    BLOCK_DEVICE_PATH, CompletionMessage, DATA_IMAGE_PATH, FailureReason, TERMINATION_LOG_PATH,
    WorkerFailure,
};
use api::pod_contract::{POD_IP_ENV, TERMINATION_LOG_ENV, env, in_pod};
use importer::Checksum;
use tokio::net::TcpListener;
use uploadproxy::server::{DEFAULT_IDLE_TIMEOUT, serve_healthz};
use uploadproxy::tls::{self, Identity};
use uploadproxy::{UploadServer, UploadServerConfig};

pub async fn run() -> Result<()> {
    let termination_log = env(TERMINATION_LOG_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| in_pod(TERMINATION_LOG_PATH));
    let result = serve().await;
    let message = match &result {
        Ok(message) => serde_json::to_string(message)?,
        Err(err) => WorkerFailure::new(
            FailureReason::Other,
            format!("Unable to process data: {err:#}"),
        )
        .termination_message(),
    };
    if let Err(err) = std::fs::write(&termination_log, &message) {
        tracing::warn!(path = %termination_log.display(), %err, "cannot write the termination message");
    }
    result.map(|_| ())
}

async fn serve() -> Result<CompletionMessage> {
    let vars = UploadServerEnv::from_env(&ProcessEnv)?;
    let config = config_from_env(&vars)?;
    let deadline = env("DEADLINE")
        .map(|text| parse_rfc3339(&text).with_context(|| format!("DEADLINE {text:?}")))
        .transpose()?;
    let identity = Identity::from_files(&in_pod(&vars.tls_cert_file), &in_pod(&vars.tls_key_file))?;
    let roots = tls::roots_from_file(&in_pod(&vars.client_cert_file))?;
    let tls_config = tls::server_config(&identity, Some(roots))?;

    let address = env("LISTEN_ADDRESS").unwrap_or_else(pod_address);
    let port = vars.listen_port.as_deref().unwrap_or("8443");
    let listen = format!("{address}:{port}");
    let listener = TcpListener::bind(&listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    let healthz =
        env("FERROVIRT_UPLOAD_HEALTHZ_ADDR").unwrap_or_else(|| format!("{}:8080", pod_address()));
    let _healthz = if healthz == "off" {
        None
    } else {
        let listener = TcpListener::bind(&healthz)
            .await
            .with_context(|| format!("listening on {healthz} for /healthz"))?;
        Some(serve_healthz(listener))
    };

    let preallocate = config.preallocate;
    let server: Arc<UploadServer> = UploadServer::new(config);
    let _serving = server.serve(listener, tls_config);
    tracing::info!(%listen, "upload server running");
    println!("upload server listening on {listen}");

    let until_deadline = async {
        match deadline {
            Some(at) => {
                let left = at.duration_since(SystemTime::now()).unwrap_or_default();
                tokio::time::sleep(left).await;
            }
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        outcome = server.succeeded() => {
            server.quiesce(Duration::from_secs(10)).await;
            tracing::info!(?outcome, "upload complete");
            Ok(CompletionMessage {
                message: Some("Upload Complete".to_string()),
                preallocation_applied: Some(preallocate && outcome.preallocated),
                ..Default::default()
            })
        }
        () = until_deadline => Ok(CompletionMessage {
            message: Some("Deadline Passed".to_string()),
            deadline_passed: Some(true),
            ..Default::default()
        }),
    }
}

/// The address of the pod's network: every address in a container; the pod's own loopback
/// address when the local node agent runs it as a process.
fn pod_address() -> String {
    env(POD_IP_ENV).unwrap_or_else(|| "0.0.0.0".into())
}

fn config_from_env(vars: &UploadServerEnv) -> Result<UploadServerConfig> {
    let block_path = env("FERROVIRT_UPLOAD_BLOCK_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| in_pod(BLOCK_DEVICE_PATH));
    let destination = match env("DESTINATION") {
        Some(path) => in_pod(&path),
        None if block_path.exists() => block_path,
        None => in_pod(DATA_IMAGE_PATH),
    };
    let block = std::fs::metadata(&destination)
        .map(|m| {
            use std::os::unix::fs::FileTypeExt;
            m.file_type().is_block_device()
        })
        .unwrap_or(false);
    let mut config = UploadServerConfig::new(&destination);
    config.image_size = vars.volume.filesystem_image_size(block)?;
    config.preallocate = vars.volume.preallocation;
    config.client_name = vars.client_name.clone();
    config.checksum = env("UPLOAD_CHECKSUM")
        .map(|c| c.parse::<Checksum>())
        .transpose()?;
    config.idle_timeout = match env("FERROVIRT_UPLOAD_IDLE_TIMEOUT") {
        None => DEFAULT_IDLE_TIMEOUT,
        Some(secs) => Duration::from_secs(
            secs.parse()
                .with_context(|| format!("FERROVIRT_UPLOAD_IDLE_TIMEOUT {secs:?} (seconds)"))?,
        ),
    };
    Ok(config)
}

/// An RFC 3339 time (`2026-11-22T10:00:00Z`, `...+02:00`, fractional seconds ignored).
fn parse_rfc3339(text: &str) -> Result<SystemTime> {
    let bad = || anyhow::anyhow!("not an RFC 3339 time");
    let (date, time) = text.split_once(['T', 't']).ok_or_else(bad)?;
    let num = |s: &str| s.parse::<i64>().map_err(|_| bad());
    let mut ymd = date.splitn(3, '-');
    let (year, month, day) = (
        num(ymd.next().ok_or_else(bad)?)?,
        num(ymd.next().ok_or_else(bad)?)?,
        num(ymd.next().ok_or_else(bad)?)?,
    );
    let (clock, offset) = if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        (clock, 0)
    } else {
        let at = time.rfind(['+', '-']).ok_or_else(bad)?;
        let (clock, zone) = time.split_at(at);
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let (h, m) = zone[1..].split_once(':').ok_or_else(bad)?;
        (clock, sign * (num(h)? * 3600 + num(m)? * 60))
    };
    let clock = clock.split('.').next().unwrap_or_default();
    let mut hms = clock.splitn(3, ':');
    let (hour, minute, second) = (
        num(hms.next().ok_or_else(bad)?)?,
        num(hms.next().ok_or_else(bad)?)?,
        num(hms.next().ok_or_else(bad)?)?,
    );
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return Err(bad());
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset;
    let seconds = u64::try_from(seconds).map_err(|_| bad())?;
    Ok(UNIX_EPOCH + Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339() {
        let at = |s| {
            parse_rfc3339(s)
                .unwrap()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs()
        };
        assert_eq!(at("1970-01-01T00:00:00Z"), 0);
        assert_eq!(at("2000-03-01T00:00:00Z"), 951_868_800);
        assert_eq!(at("2026-11-22T10:05:00.123Z"), 1_795_341_900);
        assert_eq!(at("2026-11-22T12:05:00+02:00"), 1_795_341_900);
        assert!(parse_rfc3339("yesterday").is_err());
    }
}
