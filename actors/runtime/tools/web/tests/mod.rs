mod extract;
mod fetch;
mod guard;

pub(crate) mod fake {
    //! A loopback HTTP server that records every request and answers with a closure.

    use axum::Router;
    use axum::body::{Body, to_bytes};
    use axum::extract::Request;
    use axum::http::HeaderMap;
    use axum::response::Response;
    use std::net::SocketAddr;
    use std::sync::{Arc, Mutex};

    /// One request as the server saw it.
    #[derive(Debug, Clone)]
    pub(crate) struct Seen {
        pub method: String,
        pub path: String,
        pub query: String,
        pub headers: HeaderMap,
        pub body: Vec<u8>,
    }

    impl Seen {
        pub(crate) fn header(&self, name: &str) -> Option<String> {
            self.headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        }

        /// The decoded query parameters.
        pub(crate) fn params(&self) -> Vec<(String, String)> {
            reqwest::Url::parse(&format!("http://x/?{}", self.query))
                .unwrap()
                .query_pairs()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        }

        pub(crate) fn param(&self, name: &str) -> Option<String> {
            self.params()
                .into_iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v)
        }

        pub(crate) fn json(&self) -> serde_json::Value {
            serde_json::from_slice(&self.body).unwrap()
        }
    }

    type Respond = dyn Fn(&Seen, SocketAddr) -> Response + Send + Sync;

    pub(crate) struct Fake {
        pub addr: SocketAddr,
        seen: Arc<Mutex<Vec<Seen>>>,
        task: tokio::task::JoinHandle<()>,
    }

    impl Drop for Fake {
        fn drop(&mut self) {
            self.task.abort();
        }
    }

    impl Fake {
        /// Serves on `ip:0`; `respond` gets each request and the server's own address.
        pub(crate) async fn start(
            ip: &str,
            respond: impl Fn(&Seen, SocketAddr) -> Response + Send + Sync + 'static,
        ) -> Fake {
            let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
            let addr = listener.local_addr().unwrap();
            let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
            let respond: Arc<Respond> = Arc::new(respond);
            let app = {
                let seen = seen.clone();
                Router::new().fallback(move |req: Request| {
                    let seen = seen.clone();
                    let respond = respond.clone();
                    async move {
                        let (parts, body) = req.into_parts();
                        let body = to_bytes(body, usize::MAX).await.unwrap().to_vec();
                        let s = Seen {
                            method: parts.method.to_string(),
                            path: parts.uri.path().to_string(),
                            query: parts.uri.query().unwrap_or_default().to_string(),
                            headers: parts.headers,
                            body,
                        };
                        seen.lock().unwrap().push(s.clone());
                        respond(&s, addr)
                    }
                })
            };
            let task = tokio::spawn(async move {
                axum::serve(listener, app).await.unwrap();
            });
            Fake { addr, seen, task }
        }

        pub(crate) fn url(&self, path: &str) -> String {
            format!("http://{}{path}", self.addr)
        }

        pub(crate) fn requests(&self) -> Vec<Seen> {
            self.seen.lock().unwrap().clone()
        }

        pub(crate) fn hits(&self) -> usize {
            self.seen.lock().unwrap().len()
        }
    }

    /// A response with a status, content type and body.
    pub(crate) fn reply(status: u16, content_type: &str, body: impl Into<Body>) -> Response {
        Response::builder()
            .status(status)
            .header("content-type", content_type)
            .body(body.into())
            .unwrap()
    }

    /// A redirect to `location`.
    pub(crate) fn redirect(status: u16, location: &str) -> Response {
        Response::builder()
            .status(status)
            .header("location", location)
            .body(Body::empty())
            .unwrap()
    }
}
