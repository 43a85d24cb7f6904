//! Import progress: a count of source bytes transferred, shown as a bar on a terminal or as
//! periodic lines otherwise, and exported as CDI's progress metric.

use std::io::{self, IsTerminal, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

/// Shared counters, updated by the pipeline and read by reporters.
#[derive(Debug, Default)]
pub struct Progress {
    transferred: AtomicU64,
    total: AtomicU64,
}

impl Progress {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn add(&self, bytes: u64) {
        self.transferred.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn set_total(&self, total: u64) {
        self.total.store(total, Ordering::Relaxed);
    }

    /// Marks the transfer complete: a random-access import reads less than the whole image.
    pub fn complete(&self) {
        let total = self.total.load(Ordering::Relaxed);
        self.transferred.fetch_max(total, Ordering::Relaxed);
    }

    pub fn transferred(&self) -> u64 {
        self.transferred.load(Ordering::Relaxed)
    }

    /// Total bytes to transfer, when the source said.
    pub fn total(&self) -> Option<u64> {
        Some(self.total.load(Ordering::Relaxed)).filter(|&t| t > 0)
    }

    /// Percent done, 0 to 100, when the total is known.
    pub fn percent(&self) -> Option<f64> {
        self.total()
            .map(|total| (self.transferred() as f64 * 100.0 / total as f64).min(100.0))
    }
}

/// Counts the bytes read through it.
pub struct CountingReader<R> {
    inner: R,
    progress: Arc<Progress>,
}

impl<R> CountingReader<R> {
    pub fn new(inner: R, progress: Arc<Progress>) -> Self {
        Self { inner, progress }
    }
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.add(n as u64);
        Ok(n)
    }
}

/// Shows progress on stderr until the returned guard is dropped: an indicatif bar when
/// stderr is a terminal, otherwise a line every ten seconds.
pub fn report_on_stderr(progress: Arc<Progress>) -> ReporterGuard {
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let interactive = io::stderr().is_terminal();
    let handle = std::thread::Builder::new()
        .name("fv-progress".into())
        .spawn(move || {
            if interactive {
                draw_bar(&progress, &stop_rx);
            } else {
                print_lines(&progress, &stop_rx);
            }
        })
        .ok();
    ReporterGuard {
        stop: Some(stop_tx),
        handle,
    }
}

fn draw_bar(progress: &Progress, stop: &std::sync::mpsc::Receiver<()>) {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    loop {
        bar.set_length(progress.total().unwrap_or(0));
        bar.set_position(progress.transferred());
        if !matches!(
            stop.recv_timeout(Duration::from_millis(100)),
            Err(RecvTimeoutError::Timeout)
        ) {
            break;
        }
    }
    bar.finish_and_clear();
}

fn print_lines(progress: &Progress, stop: &std::sync::mpsc::Receiver<()>) {
    while let Err(RecvTimeoutError::Timeout) = stop.recv_timeout(Duration::from_secs(10)) {
        match progress.percent() {
            Some(pct) => eprintln!("transferred {} bytes ({pct:.1}%)", progress.transferred()),
            None => eprintln!("transferred {} bytes", progress.transferred()),
        }
    }
}

/// Stops the reporter when dropped.
pub struct ReporterGuard {
    stop: Option<std::sync::mpsc::Sender<()>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Drop for ReporterGuard {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}
