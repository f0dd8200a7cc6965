//! Lines of a log file, plain or gzip-compressed (several members
//! concatenated, as logrotate leaves them), read in bounded memory: a line
//! longer than `MAX_LINE` is skipped, not held.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use flate2::read::MultiGzDecoder;

/// Longer lines are skipped as malformed.
pub(crate) const MAX_LINE: usize = 64 * 1024;

/// Counts the bytes read from the file (compressed ones for gzip), for
/// progress.
struct Counted<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

pub(crate) struct LogReader {
    input: Box<dyn BufRead + Send>,
    /// Bytes of the file read so far.
    pub read: Arc<AtomicU64>,
    /// The file's size.
    pub size: u64,
    pub gzip: bool,
    pub line_no: u64,
}

/// What one call to `next_line` found.
pub(crate) enum Line {
    Text(String),
    /// Longer than `MAX_LINE`: skipped.
    TooLong,
    End,
}

impl LogReader {
    pub(crate) fn open(path: &Path) -> io::Result<LogReader> {
        let file = File::open(path)?;
        let size = file.metadata()?.len();
        LogReader::over(file, size)
    }

    /// A log already in memory (tests, fuzzing); gzip detected alike.
    pub(crate) fn from_bytes(bytes: Arc<[u8]>) -> io::Result<LogReader> {
        let size = bytes.len() as u64;
        LogReader::over(io::Cursor::new(bytes), size)
    }

    /// Lines of `source` (`size` bytes), through gzip when it starts with
    /// gzip's magic bytes.
    fn over(source: impl Read + Send + 'static, size: u64) -> io::Result<LogReader> {
        let read = Arc::new(AtomicU64::new(0));
        let mut raw = BufReader::with_capacity(
            256 * 1024,
            Counted {
                inner: source,
                read: read.clone(),
            },
        );
        let gzip = raw.fill_buf()?.starts_with(&[0x1f, 0x8b]);
        let input: Box<dyn BufRead + Send> = if gzip {
            Box::new(BufReader::with_capacity(
                256 * 1024,
                MultiGzDecoder::new(raw),
            ))
        } else {
            Box::new(raw)
        };
        Ok(LogReader {
            input,
            read,
            size,
            gzip,
            line_no: 0,
        })
    }

    /// The next line, without its end, invalid UTF-8 replaced.
    pub(crate) fn next_line(&mut self) -> io::Result<Line> {
        let mut buf = Vec::new();
        let mut too_long = false;
        loop {
            let chunk = match self.input.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                if buf.is_empty() && !too_long {
                    return Ok(Line::End);
                }
                break;
            }
            let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            if !too_long {
                if buf.len() + take > MAX_LINE + 1 {
                    too_long = true;
                    buf = Vec::new();
                } else {
                    buf.extend_from_slice(&chunk[..take]);
                }
            }
            self.input.consume(take);
            if done {
                break;
            }
        }
        self.line_no += 1;
        if too_long {
            return Ok(Line::TooLong);
        }
        while matches!(buf.last(), Some(b'\n' | b'\r')) {
            buf.pop();
        }
        Ok(Line::Text(match String::from_utf8(buf) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use flate2::write::GzEncoder;

    use super::*;

    fn lines(path: &Path) -> Vec<String> {
        let mut r = LogReader::open(path).unwrap();
        let mut out = Vec::new();
        loop {
            match r.next_line().unwrap() {
                Line::Text(t) => out.push(t),
                Line::TooLong => out.push("<too long>".into()),
                Line::End => return out,
            }
        }
    }

    #[test]
    fn plain_gzip_and_long_lines() {
        let dir = std::env::temp_dir().join(format!("autoperf-reader-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = format!("a\r\nb\n{}\nc", "x".repeat(MAX_LINE + 10));
        std::fs::write(dir.join("plain.log"), &text).unwrap();
        let want = ["a", "b", "<too long>", "c"];
        assert_eq!(lines(&dir.join("plain.log")), want);
        // Two gzip members, as rotated logs concatenated.
        let mut gz = Vec::new();
        for part in [&text[..5], &text[5..]] {
            let mut e = GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(part.as_bytes()).unwrap();
            gz.extend(e.finish().unwrap());
        }
        std::fs::write(dir.join("z.log.gz"), gz).unwrap();
        assert_eq!(lines(&dir.join("z.log.gz")), want);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
