use super::*;

/// An accepted connection sends each write at once (`TCP_NODELAY`), so a stream's last frame is
/// not held back waiting for the client's delayed acknowledgement.
#[tokio::test]
async fn accepted_connections_have_nagle_turned_off() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (stream, peer) = listener.accept().await.unwrap();
    assert!(!stream.nodelay().unwrap(), "the system default is Nagle on");
    configure(&stream, peer);
    assert!(stream.nodelay().unwrap());
}
