use super::*;

/// An accepted connection has TCP_NODELAY set, so a stream's deltas and its end are not held
/// back by Nagle's algorithm (the OS default is off).
#[tokio::test]
async fn accepted_connections_have_nodelay() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let _client = TcpStream::connect(addr).await.unwrap();
    let (stream, peer) = listener.accept().await.unwrap();
    assert!(!stream.nodelay().unwrap(), "the OS default is expected off");
    configure_accepted(&stream, peer);
    assert!(stream.nodelay().unwrap());
}
