//! The listener the server accepts on. It exists for one refusal that happens before
//! any of our code runs: a request whose header section is larger than hyper will
//! buffer is answered by hyper itself with `431` and an empty body. Its connections
//! recognize that answer as it is written and replace it with the same status in the
//! error envelope (code `HEADER_TOO_LARGE`), so that no refusal leaves without one.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

use crate::code::ErrorCode;

/// The start of hyper's own answer to an oversized header section.
const HYPER_431: &[u8] = b"HTTP/1.1 431 ";

fn envelope_431() -> Vec<u8> {
    let body = serde_json::json!({
        "success": false,
        "statusCode": ErrorCode::HeaderTooLarge.status(),
        "code": ErrorCode::HeaderTooLarge,
        "message": "the request's headers are too large",
    })
    .to_string();
    format!(
        "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A TCP listener whose connections answer an oversized header in the envelope.
#[derive(Debug)]
pub struct EnvelopedListener(pub TcpListener);

impl axum::serve::Listener for EnvelopedListener {
    type Io = Enveloped<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (stream, addr) = axum::serve::Listener::accept(&mut self.0).await;
        (
            Enveloped {
                inner: stream,
                replacement: None,
            },
            addr,
        )
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

/// A connection that rewrites hyper's bodiless 431 into the envelope.
#[derive(Debug)]
pub struct Enveloped<S> {
    inner: S,
    /// The envelope being written in place of hyper's answer, and how much is out.
    replacement: Option<(Vec<u8>, usize)>,
}

impl<S: AsyncWrite + Unpin> Enveloped<S> {
    /// Writes what is left of the replacement; ready when all of it is out.
    fn drive(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, sent)) = &mut self.replacement {
            let rest = bytes.get(*sent..).unwrap_or_default();
            if rest.is_empty() {
                self.replacement = None;
                break;
            }
            match Pin::new(&mut self.inner).poll_write(cx, rest) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *sent += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Enveloped<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Enveloped<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.replacement.is_none() && buf.starts_with(HYPER_431) {
            // hyper's whole answer (status line, headers, no body) is in `buf`.
            self.replacement = Some((envelope_431(), 0));
            return match self.drive(cx) {
                Poll::Ready(Ok(())) => Poll::Ready(Ok(buf.len())),
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                // Resumed by the next call with the same bytes.
                Poll::Pending => Poll::Pending,
            };
        }
        if self.replacement.is_some() {
            return match self.drive(cx) {
                Poll::Ready(Ok(())) => Poll::Ready(Ok(buf.len())),
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            };
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.drive(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut self.inner).poll_flush(cx),
            other => other,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.drive(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut self.inner).poll_shutdown(cx),
            other => other,
        }
    }
}

/// The address of a connection's peer, handed to every request of the connection
/// (sign-in throttles per client address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, EnvelopedListener>>
    for PeerAddr
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, EnvelopedListener>) -> Self {
        PeerAddr(*stream.remote_addr())
    }
}
