//! A TCP forwarder whose connections a test can cut, to break a client's link to etcd on demand.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub struct Proxy {
    pub addr: SocketAddr,
    /// `true` forwards; `false` drops every connection and refuses new ones.
    open: Arc<watch::Sender<bool>>,
    task: JoinHandle<()>,
}

impl Proxy {
    pub async fn start(target: SocketAddr) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let open = Arc::new(watch::Sender::new(true));
        let task = tokio::spawn(accept(listener, target, open.clone()));
        Ok(Self { addr, open, task })
    }

    pub fn cut(&self) {
        self.open.send_replace(false);
    }

    pub fn restore(&self) {
        self.open.send_replace(true);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.task.abort();
    }
}

async fn accept(listener: TcpListener, target: SocketAddr, open: Arc<watch::Sender<bool>>) {
    while let Ok((client, _)) = listener.accept().await {
        if !*open.borrow() {
            continue; // dropped: the client sees the connection close
        }
        let mut state = open.subscribe();
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(target).await else {
                return;
            };
            let (mut client, mut server) = (client, server);
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                _ = state.wait_for(|open| !*open) => {}
            }
        });
    }
}
