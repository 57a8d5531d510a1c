//! Reading a log: the file, un-gzipped when its name ends in `.gz` or it
//! starts with gzip's magic, cut into lines as Python's text files cut them
//! (at `\n`, `\r\n` or a lone `\r`; bytes that are not UTF-8 replaced), and
//! how much of the file has been read (for a progress bar).

use flate2::read::MultiGzDecoder;
use std::borrow::Cow;
use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::rc::Rc;

/// A file read through a count of its bytes read.
struct Counted {
    file: File,
    read: Rc<Cell<u64>>,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

/// The lines of one log.
pub struct Source {
    reader: Box<dyn BufRead>,
    /// Whether the file is gzipped.
    pub gzip: bool,
    /// The file's size, in bytes.
    pub size: u64,
    read: Rc<Cell<u64>>,
    chunk: Vec<u8>,
    /// Where the next line starts in `chunk`.
    at: usize,
}

impl Source {
    /// Opens the log at `path`.
    pub fn open(path: &str) -> io::Result<Source> {
        let mut file = File::open(path)?;
        let size = file.metadata()?.len();
        let mut magic = [0_u8; 2];
        let got = file.read(&mut magic)?;
        let gzip = path.ends_with(".gz") || magic[..got] == [0x1f, 0x8b];
        let read = Rc::new(Cell::new(0));
        // read again from the start, through the count
        let file = {
            use std::io::Seek;
            file.seek(io::SeekFrom::Start(0))?;
            file
        };
        let counted = Counted {
            file,
            read: Rc::clone(&read),
        };
        let reader: Box<dyn BufRead> = if gzip {
            Box::new(BufReader::with_capacity(
                1 << 16,
                MultiGzDecoder::new(BufReader::with_capacity(1 << 16, counted)),
            ))
        } else {
            Box::new(BufReader::with_capacity(1 << 16, counted))
        };
        Ok(Source {
            reader,
            gzip,
            size,
            read,
            chunk: Vec::new(),
            at: 0,
        })
    }

    /// The count of the file's bytes read, as it grows.
    pub fn read_count(&self) -> Rc<Cell<u64>> {
        Rc::clone(&self.read)
    }

    /// The next line without its end (`\n`, `\r\n` or `\r`), or `None`
    /// at the end; whether it had an end.
    pub fn next_line(&mut self) -> io::Result<Option<(Cow<'_, str>, bool)>> {
        if self.at >= self.chunk.len() {
            self.chunk.clear();
            self.at = 0;
            if self.reader.read_until(b'\n', &mut self.chunk)? == 0 {
                return Ok(None);
            }
        }
        let rest = &self.chunk[self.at..];
        // a lone \r ends a line too; \r\n is one end
        let (len, end) = match memchr::memchr2(b'\r', b'\n', rest) {
            Some(i) if rest[i] == b'\r' && rest.get(i + 1) == Some(&b'\n') => (i, 2),
            Some(i) => (i, 1),
            None => (rest.len(), 0),
        };
        let start = self.at;
        self.at += len + end;
        let body = &self.chunk[start..start + len];
        let line = match std::str::from_utf8(body) {
            Ok(text) => Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(body),
        };
        Ok(Some((line, end > 0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(bytes: &[u8], name: &str) -> Vec<String> {
        let dir = std::env::temp_dir().join(format!("rk-source-{}-{name}", std::process::id()));
        std::fs::write(&dir, bytes).unwrap();
        let mut source = Source::open(dir.to_str().unwrap()).unwrap();
        let mut out = Vec::new();
        while let Some((line, ended)) = source.next_line().unwrap() {
            out.push(format!("{line}{}", if ended { "\n" } else { "" }));
        }
        assert_eq!(source.read_count().get(), bytes.len() as u64);
        std::fs::remove_file(dir).unwrap();
        out
    }

    #[test]
    fn lines_end_as_in_python() {
        assert_eq!(
            lines_of(b"a\nb\r\nc\rd\xffe\n\nlast", "plain"),
            ["a\n", "b\n", "c\n", "d\u{fffd}e\n", "\n", "last"]
        );
    }

    #[test]
    fn gzip_is_found_by_its_magic() {
        use flate2::write::GzEncoder;
        use std::io::Write;
        let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"one\ntwo\n").unwrap();
        let bytes = gz.finish().unwrap();
        assert_eq!(lines_of(&bytes, "zipped"), ["one\n", "two\n"]);
    }
}
