//! Answers ready together leave in one write. Over HTTP/2 every stream's frames go out through
//! the connection's one task, which flushes each time it runs; with the runtime running a woken
//! task next, an answer woken alone was written alone — one `writev`, and on loopback the
//! peer's wake-up, per acknowledged record at 64 writers. [`Coalesced`] holds what the
//! connection writes until it flushes, and defers the first flush of a burst by one turn of the
//! runtime (the connection's task goes to the back of its worker's queue), so that the answers
//! other tasks have ready by then join the same write. Bounded: past `max` bytes held, the
//! bytes go out at once; `max` 0 writes through.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connection whose writes are held until a flush, and whose flush yields once a burst.
#[derive(Debug)]
pub struct Coalesced<T> {
    io: T,
    /// The bytes written and not yet sent; `buf[sent..]` is what is left of them.
    buf: Vec<u8>,
    sent: usize,
    /// The most bytes held (0: every write goes straight through).
    max: usize,
    /// The flush of the bytes held has yielded its turn once.
    yielded: bool,
}

impl<T> Coalesced<T> {
    /// `io`, holding at most `max` bytes (0: no coalescing at all).
    pub fn new(io: T, max: usize) -> Coalesced<T> {
        Coalesced { io, buf: Vec::new(), sent: 0, max, yielded: false }
    }

    fn held(&self) -> usize {
        self.buf.len() - self.sent
    }
}

impl<T: AsyncWrite + Unpin> Coalesced<T> {
    /// Sends every byte held.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.buf.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.buf[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.buf.clear();
        if self.buf.capacity() > self.max / 4 {
            // A large burst's room is given back: between bursts, a connection keeps room for a
            // quarter of the bound at most.
            self.buf = Vec::new();
        }
        self.sent = 0;
        self.yielded = false;
        Poll::Ready(Ok(()))
    }

    /// Room for `len` more bytes: held ones sent first when they would pass the bound. `false`
    /// when `len` alone is past it (then it goes straight through).
    fn poll_room(&mut self, cx: &mut Context<'_>, len: usize) -> Poll<io::Result<bool>> {
        if self.held() + len > self.max {
            ready!(self.poll_drain(cx))?;
        }
        Poll::Ready(Ok(len <= self.max))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Coalesced<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Coalesced<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        if !ready!(self.poll_room(cx, data.len()))? {
            return Pin::new(&mut self.io).poll_write(cx, data);
        }
        self.buf.extend_from_slice(data);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        slices: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let len = slices.iter().map(|s| s.len()).sum();
        if !ready!(self.poll_room(cx, len))? {
            return Pin::new(&mut self.io).poll_write_vectored(cx, slices);
        }
        for s in slices {
            self.buf.extend_from_slice(s);
        }
        Poll::Ready(Ok(len))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.held() > 0 && !self.yielded {
            // Once a burst: this task goes to the back of the queue, the tasks ready now run
            // and add their answers, then the flush sends them all.
            self.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    #[test]
    fn writes_are_held_until_the_flush_and_then_sent_in_order() {
        runtime().block_on(async {
            let (near, mut far) = tokio::io::duplex(1 << 16);
            let mut c = Coalesced::new(near, 64);
            c.write_all(b"one ").await.unwrap();
            c.write_all_buf(&mut &b"two "[..]).await.unwrap();
            let mut got = [0u8; 8];
            let early = tokio::time::timeout(std::time::Duration::from_millis(50), far.read(&mut got)).await;
            assert!(early.is_err(), "nothing is sent before the flush");
            c.flush().await.unwrap();
            far.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"one two ");
            // Past the bound, the bytes held go first, then the large write straight through.
            c.write_all(b"abc").await.unwrap();
            let big = vec![b'x'; 100];
            c.write_all(&big).await.unwrap();
            let mut got = vec![0u8; 103];
            far.read_exact(&mut got).await.unwrap();
            assert_eq!((&got[..3], &got[3..]), (&b"abc"[..], &big[..]), "in order, unflushed");
            c.write_all(b"end").await.unwrap();
            c.shutdown().await.unwrap();
            let mut rest = vec![];
            far.read_to_end(&mut rest).await.unwrap();
            assert_eq!(rest, b"end", "a shutdown sends what is held, then ends the stream");
        });
    }

    #[test]
    fn a_large_burst_s_room_is_given_back_once_sent() {
        runtime().block_on(async {
            let (near, mut far) = tokio::io::duplex(1 << 20);
            let mut c = Coalesced::new(near, 64 << 10);
            c.write_all(&[b'y'; 100]).await.unwrap();
            c.flush().await.unwrap();
            assert!(c.buf.capacity() >= 100, "a small burst's room is kept");
            c.write_all(&vec![b'y'; 40 << 10]).await.unwrap();
            assert_eq!(c.held(), 40 << 10, "held: under the bound");
            c.flush().await.unwrap();
            assert_eq!(c.buf.capacity(), 0, "a large burst's room is given back once sent");
            let mut got = vec![0u8; (40 << 10) + 100];
            far.read_exact(&mut got).await.unwrap();
        });
    }

    #[test]
    fn a_bound_of_zero_writes_through() {
        runtime().block_on(async {
            let (near, mut far) = tokio::io::duplex(1 << 16);
            let mut c = Coalesced::new(near, 0);
            c.write_all(b"now").await.unwrap();
            let mut got = [0u8; 3];
            far.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"now", "sent without a flush");
        });
    }

    struct Count(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for Count {
        fn wake(self: std::sync::Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &std::sync::Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn a_flush_yields_once_a_burst_and_what_is_written_meanwhile_leaves_with_it() {
        runtime().block_on(async {
            let (near, mut far) = tokio::io::duplex(1 << 16);
            let mut c = Coalesced::new(near, 1024);
            let wakes = std::sync::Arc::new(Count(std::sync::atomic::AtomicUsize::new(0)));
            let waker = std::task::Waker::from(std::sync::Arc::clone(&wakes));
            let mut cx = Context::from_waker(&waker);
            let woken = || wakes.0.load(std::sync::atomic::Ordering::SeqCst);
            assert!(Pin::new(&mut c).poll_flush(&mut cx).is_ready(), "nothing held: no yield");
            assert!(matches!(Pin::new(&mut c).poll_write(&mut cx, b"a"), Poll::Ready(Ok(1))));
            assert!(Pin::new(&mut c).poll_flush(&mut cx).is_pending(), "the first flush of a burst yields");
            assert_eq!(woken(), 1, "and wakes its task again");
            assert!(matches!(Pin::new(&mut c).poll_write(&mut cx, b"b"), Poll::Ready(Ok(1))));
            assert!(matches!(Pin::new(&mut c).poll_flush(&mut cx), Poll::Ready(Ok(()))), "the second sends");
            let mut got = [0u8; 8];
            let n = far.read(&mut got).await.unwrap();
            assert_eq!(&got[..n], b"ab", "one write");
            assert!(matches!(Pin::new(&mut c).poll_write(&mut cx, b"c"), Poll::Ready(Ok(1))));
            assert!(Pin::new(&mut c).poll_flush(&mut cx).is_pending(), "a new burst yields again");
            assert_eq!(woken(), 2);
        });
    }
}
