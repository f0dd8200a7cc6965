//! `POST /lock`: one global critical section per web process, held without
//! using CPU, that writes real bytes to a file — a non-CPU bottleneck whose
//! capacity is `1 / hold time` (200/s at 5 ms) however many cores there are.
//!
//! The file lives in a data directory of its own under the system temp dir,
//! removed when the server stops.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Mutex;

/// The data file is truncated when it reaches this size, so a long run does
/// not fill the disk; truncation is cheap and rare (once per 64 MiB written).
const MAX_FILE_BYTES: u64 = 64 << 20;

/// Largest `bytes=` of one request.
pub const MAX_WRITE_BYTES: u64 = 16 << 20;

/// The lock, its file, and the directory that holds it.
pub struct CriticalSection {
    file: Mutex<DataFile>,
    dir: PathBuf,
}

struct DataFile {
    file: File,
    len: u64,
}

/// Tells in-process servers of one test apart in the temp dir.
static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

impl CriticalSection {
    /// Creates the data directory `autoperf-testbed-{pid}-{n}` and its file.
    pub fn create() -> std::io::Result<CriticalSection> {
        let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("autoperf-testbed-{}-{n}", std::process::id()));
        fs::create_dir_all(&dir)?;
        // O_APPEND: after a truncation the next write starts at offset 0.
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("lock.dat"))?;
        file.set_len(0)?;
        Ok(CriticalSection {
            file: Mutex::new(DataFile { file, len: 0 }),
            dir,
        })
    }

    /// Takes the lock, appends `bytes` bytes with write(2), sleeps `hold`,
    /// releases. Appending, not rewriting, makes each request dirty new page
    /// cache pages, so the process's `write_bytes` grows by about `bytes`.
    pub async fn enter(&self, hold: Duration, bytes: u64) -> std::io::Result<()> {
        let mut data = self.file.lock().await;
        if bytes > 0 {
            if data.len + bytes > MAX_FILE_BYTES {
                data.file.set_len(0)?;
                data.len = 0;
            }
            // Blocking, but a page-cache write of a few KiB takes microseconds:
            // less than handing it to another thread would.
            write_pattern(&mut data.file, bytes)?;
            data.len += bytes;
        }
        // tokio's timer wheel rounds up to whole milliseconds (a 5 ms hold
        // became ~6.2 ms, 161/s instead of 200/s); a blocked thread's
        // nanosleep overshoots by tens of microseconds. The lock stays held
        // across the await, and the thread sleeps without using CPU.
        let _ = tokio::task::spawn_blocking(move || std::thread::sleep(hold)).await;
        Ok(())
    }
}

fn write_pattern(file: &mut File, mut bytes: u64) -> std::io::Result<()> {
    const CHUNK: [u8; 8192] = [b'x'; 8192];
    while bytes > 0 {
        let n = bytes.min(CHUNK.len() as u64) as usize;
        file.write_all(&CHUNK[..n])?;
        bytes -= n as u64;
    }
    Ok(())
}

impl Drop for CriticalSection {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}
