//! One ordered byte stream each way between two ranks: a pair of shared-memory rings or
//! a TCP connection, read and written without blocking.

use std::io::{self, BufReader, IoSlice, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};

use crate::shm::{ShmReader, ShmWriter};

/// Bytes read from a TCP socket per system call when small frames arrive.
pub(crate) const TCP_READ_BUFFER_BYTES: usize = 64 << 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Shm,
    Tcp,
}

impl Transport {
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Shm => "shm",
            Transport::Tcp => "tcp",
        }
    }
}

/// One ordered byte stream each way.
pub enum LaneIo {
    Shm { rx: ShmReader, tx: ShmWriter },
    Tcp { rx: BufReader<TcpStream>, tx: TcpStream },
}

impl LaneIo {
    /// Write a prefix of `parts` (in order) and then up to `pad` bytes of a frame's
    /// padding (`frame_pad`: 0 over TCP), without waiting; the bytes written.
    pub fn try_write(&mut self, parts: &[&[u8]], pad: usize) -> io::Result<usize> {
        match self {
            LaneIo::Shm { tx, .. } => tx.try_write_parts(parts, pad),
            LaneIo::Tcp { tx, .. } => {
                debug_assert_eq!(pad, 0, "a TCP stream is not padded");
                let slices: Vec<IoSlice> = parts.iter().filter(|p| !p.is_empty()).map(|p| IoSlice::new(p)).collect();
                if slices.is_empty() {
                    return Ok(0);
                }
                match tx.write_vectored(&slices) {
                    Ok(0) => Err(io::Error::new(io::ErrorKind::WriteZero, "the connection takes no bytes")),
                    Ok(n) => Ok(n),
                    Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => Ok(0),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Write a frame (`head`, `body`, then `pad` bytes of padding, `frame_pad`) as far as
    /// the stream takes it, without waiting; the bytes written.
    pub fn try_write_frame<const H: usize>(&mut self, head: &[u8; H], body: &[u8], pad: usize) -> io::Result<usize> {
        match self {
            LaneIo::Shm { tx, .. } => tx.try_write_frame(head, body, pad),
            LaneIo::Tcp { .. } => self.try_write(&[head, body], pad),
        }
    }

    /// Read up to `buf.len()` bytes that have arrived, without waiting; the bytes read.
    pub fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        match self {
            LaneIo::Shm { rx, .. } => rx.try_read(buf),
            LaneIo::Tcp { rx, .. } => match rx.read(buf) {
                Ok(0) => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the peer closed the connection")),
                Ok(n) => Ok(n),
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => Ok(0),
                Err(e) => Err(e),
            },
        }
    }

    /// The padding after a frame of `len` bytes (header included) written next: a small
    /// shared-memory frame ends on a cache line (`shm::frame_pad`); a TCP stream is not
    /// padded.
    pub fn frame_pad(&self, len: usize) -> usize {
        match self {
            LaneIo::Shm { tx, .. } => tx.frame_pad(len),
            LaneIo::Tcp { .. } => 0,
        }
    }

    /// A frame of `len` bytes (header included) has been read whole (shared memory: the
    /// next one starts past its padding, `ShmReader::frame_read`).
    pub fn frame_read(&mut self, len: usize) {
        if let LaneIo::Shm { rx, .. } = self {
            rx.frame_read(len);
        }
    }

    /// The socket to poll, for TCP lanes.
    pub fn fd(&self) -> Option<RawFd> {
        match self {
            LaneIo::Shm { .. } => None,
            LaneIo::Tcp { tx, .. } => Some(tx.as_raw_fd()),
        }
    }

    /// For shared-memory lanes, whether the peer's process has gone.
    pub fn peer_gone(&self) -> bool {
        match self {
            LaneIo::Shm { rx, tx } => !rx.peer_alive() || !tx.peer_alive(),
            LaneIo::Tcp { .. } => false,
        }
    }
}
