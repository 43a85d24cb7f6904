//! A real S3-compatible server on loopback for tests: moto's server mode (PyPI `moto[server]`,
//! installed by scripts/test), with buckets and objects created through its S3 API.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// moto's S3 server; killed on drop.
pub struct S3Server {
    child: Child,
    pub port: u16,
}

impl S3Server {
    pub fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new("python3")
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting python3 -m moto.server (pip install 'moto[server]')");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "moto_server did not start within 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        S3Server { child, port }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Creates `bucket` (if needed) and uploads `file` as `key`.
    pub fn put(&self, bucket: &str, key: &str, file: &Path) {
        let bucket_url = format!("{}/{bucket}", self.endpoint());
        let created = Command::new("curl")
            .args(["-sf", "-X", "PUT", &bucket_url])
            .status()
            .expect("curl");
        assert!(created.success(), "creating bucket {bucket}");
        let object_url = format!("{bucket_url}/{key}");
        let uploaded = Command::new("curl")
            .args(["-sf", "-T"])
            .arg(file)
            .arg(&object_url)
            .status()
            .expect("curl");
        assert!(uploaded.success(), "uploading {key}");
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
