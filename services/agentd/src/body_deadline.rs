//! The deadline of a request's body (`server.request_timeout_ms`). actix's own client request
//! timeout covers only the request line and headers: a client that announces a
//! `Content-Length` and then sends less would hold its connection and a handler for ever. The
//! [`body_deadline`] middleware wraps each request's body in a stream that fails once the
//! deadline, counted from when the headers were read, passes before the body ends, and answers
//! such a request `408 request_timeout` (closing the connection, whose rest cannot be framed)
//! whatever the route's extractor made of the failure.

use crate::errors::ApiError;
use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::http::StatusCode;
use actix_web::middleware::Next;
use actix_web::web::{Bytes, Data};
use actix_web::{HttpMessage, HttpResponse};
use agentd_proto::{AgentdError, ErrorCode};
use futures::Stream;
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

/// How long a request's body may take to arrive once its headers are read.
#[derive(Debug, Clone, Copy)]
pub struct RequestTimeout(pub Duration);

/// A request body that ends in an error once its deadline passes (and says so through
/// `expired`, which the middleware reads once the route has answered).
struct Deadline {
    body: Payload,
    timer: Pin<Box<tokio::time::Sleep>>,
    expired: Rc<Cell<bool>>,
    done: bool,
}

impl Stream for Deadline {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        // The timer first, so a body that trickles in byte by byte meets the deadline too.
        if this.timer.as_mut().poll(cx).is_ready() {
            this.done = true;
            this.expired.set(true);
            return Poll::Ready(Some(Err(PayloadError::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the request body did not arrive within server.request_timeout_ms",
            )))));
        }
        let next = Pin::new(&mut this.body).poll_next(cx);
        if let Poll::Ready(None) = next {
            this.done = true;
        }
        next
    }
}

/// Middleware: gives the request's body (if it has one) the [`RequestTimeout`] of the app's
/// data, and answers `408 request_timeout` with `Connection: close` when it ran out.
pub async fn body_deadline(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let expired = Rc::new(Cell::new(false));
    let Some(limit) = req.app_data::<Data<RequestTimeout>>().map(|t| t.0) else {
        return next
            .call(req)
            .await
            .map(ServiceResponse::map_into_boxed_body);
    };
    match req.take_payload() {
        Payload::None => {}
        body => req.set_payload(Payload::Stream {
            payload: Box::pin(Deadline {
                body,
                timer: Box::pin(tokio::time::sleep(limit)),
                expired: expired.clone(),
                done: false,
            }),
        }),
    }
    let res = next.call(req).await;
    if !expired.get() {
        return res.map(ServiceResponse::map_into_boxed_body);
    }
    let refusal = AgentdError::new(
        ErrorCode::RequestTimeout,
        format!(
            "the request body did not arrive in full within server.request_timeout_ms ({} ms)",
            limit.as_millis()
        ),
    );
    match res {
        Ok(res) => {
            let (req, _) = res.into_parts();
            let answer = HttpResponse::build(StatusCode::REQUEST_TIMEOUT)
                .force_close()
                .json(refusal);
            Ok(ServiceResponse::new(req, answer))
        }
        // No request to answer with: the error goes on, rendered as JSON by the server.
        Err(_) => Err(ApiError(refusal).into()),
    }
}
