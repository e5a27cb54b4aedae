//! OTLP/HTTP: `POST /v1/traces` and `POST /v1/logs`, protobuf or JSON bodies (gzip, with a
//! `Content-Length` or chunked), each answered in the request's content type once the
//! receiver ([`crate::receiver`]) has made its events durable, or refused with the status
//! the OTLP exporters act on (docs/otlp.md, "Delivery").

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Request, Response, StatusCode, body::Incoming, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use opentelemetry_proto::tonic::collector::{
    logs::v1::{ExportLogsPartialSuccess, ExportLogsServiceResponse},
    trace::v1::{ExportTracePartialSuccess, ExportTraceServiceResponse},
};
use prost::Message;

use crate::receiver::{Ingest, Refused, partial, partial_logs};

/// Answers OTLP/HTTP exports on `l` until the task is aborted.
pub(crate) async fn serve(l: tokio::net::TcpListener, ingest: Arc<Ingest>) {
    loop {
        let Ok((stream, _)) = l.accept().await else {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        let ingest = ingest.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let ingest = ingest.clone();
                async move { Ok::<_, std::convert::Infallible>(http_export(ingest, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(std::time::Duration::from_secs(30))
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Format {
    Protobuf,
    Json,
}

fn respond(status: StatusCode, format: Format, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    let ct = match format {
        Format::Protobuf => "application/x-protobuf",
        Format::Json => "application/json",
    };
    r.headers_mut()
        .insert(header::CONTENT_TYPE, header::HeaderValue::from_static(ct));
    r
}

/// An OTLP `Status` (google.rpc.Status) with a message, in the request's format.
fn status_body(format: Format, code: i32, message: &str) -> Vec<u8> {
    match format {
        Format::Json => serde_json::json!({"code": code, "message": message})
            .to_string()
            .into_bytes(),
        Format::Protobuf => {
            // google.rpc.Status { int32 code = 1; string message = 2; }
            let mut b = Vec::new();
            prost::encoding::int32::encode(1, &code, &mut b);
            prost::encoding::string::encode(2, &message.to_owned(), &mut b);
            b
        }
    }
}

fn refusal(format: Format, r: &Refused) -> Response<Full<Bytes>> {
    let (status, code, msg) = match r {
        Refused::Malformed(m) => (StatusCode::BAD_REQUEST, 3, m.clone()),
        Refused::TooLarge => (
            StatusCode::PAYLOAD_TOO_LARGE,
            8,
            "the export is over the size limit".to_owned(),
        ),
        Refused::Busy => (
            StatusCode::TOO_MANY_REQUESTS,
            8,
            "too many exports at once; retry".to_owned(),
        ),
        Refused::Unavailable(m) => (
            StatusCode::SERVICE_UNAVAILABLE,
            14,
            format!("the recorder is unavailable: {m}"),
        ),
        Refused::Unauthorized => (
            StatusCode::UNAUTHORIZED,
            16,
            "a bearer token is required".to_owned(),
        ),
    };
    let mut resp = respond(status, format, status_body(format, code, &msg));
    if matches!(r, Refused::Busy | Refused::Unavailable(_)) {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    }
    resp
}

async fn http_export(ingest: Arc<Ingest>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let ct = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let format = if ct.starts_with("application/json") {
        Format::Json
    } else {
        Format::Protobuf
    };
    let signal = match req.uri().path() {
        "/v1/traces" => Signal::Traces,
        "/v1/logs" => Signal::Logs,
        _ => {
            return refusal(
                format,
                &Refused::Malformed("the OTLP/HTTP paths are /v1/traces and /v1/logs".into()),
            );
        }
    };
    if req.method() != hyper::Method::POST {
        return refusal(format, &Refused::Malformed("exports are POSTed".into()));
    }
    if !ct.starts_with("application/json") && !ct.starts_with("application/x-protobuf") {
        let mut r = refusal(
            format,
            &Refused::Malformed(format!(
                "unsupported content type `{ct}` (application/x-protobuf or application/json)"
            )),
        );
        *r.status_mut() = StatusCode::UNSUPPORTED_MEDIA_TYPE;
        return r;
    }
    let auth = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes().to_vec());
    if !ingest.authorized(auth.as_deref()) {
        return refusal(format, &Refused::Unauthorized);
    }
    let gzip = match req
        .headers()
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
    {
        None | Some("identity") => false,
        Some("gzip") => true,
        Some(other) => {
            return refusal(
                format,
                &Refused::Malformed(format!("unsupported content encoding `{other}` (gzip)")),
            );
        }
    };
    // Chunked bodies (no Content-Length: Gemini CLI's) are read the same way, to the limit.
    let body = match Limited::new(req.into_body(), ingest.max_body)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => return refusal(format, &Refused::TooLarge),
    };
    let work = ingest.clone();
    let r = tokio::task::spawn_blocking(move || {
        work.admitted(|| {
            let body = if gzip {
                gunzip(&body, work.max_body)?
            } else {
                body.to_vec()
            };
            match signal {
                Signal::Traces => work.record(&decode(&body, format)?).map(|(n, _)| n),
                Signal::Logs => work.record_logs(&decode(&body, format)?),
            }
        })
    })
    .await
    .unwrap_or_else(|e| Err(Refused::Unavailable(e.to_string())));
    match r {
        Ok(rejected) => respond(StatusCode::OK, format, answer(signal, format, rejected)),
        Err(e) => refusal(format, &e),
    }
}

/// What an OTLP/HTTP export is.
#[derive(Clone, Copy)]
enum Signal {
    Traces,
    Logs,
}

/// The body of an export's `200` answer: `Export{Trace,Logs}ServiceResponse`, with
/// `partialSuccess` when `rejected` spans or records were rejected.
fn answer(signal: Signal, format: Format, rejected: u64) -> Vec<u8> {
    let (count, p) = match signal {
        Signal::Traces => match partial(rejected) {
            None => return empty_answer::<ExportTraceServiceResponse>(format),
            Some(p) => (("rejectedSpans", p.rejected_spans), p.error_message),
        },
        Signal::Logs => match partial_logs(rejected) {
            None => return empty_answer::<ExportLogsServiceResponse>(format),
            Some(p) => (
                ("rejectedLogRecords", p.rejected_log_records),
                p.error_message,
            ),
        },
    };
    match format {
        Format::Protobuf => match signal {
            Signal::Traces => ExportTraceServiceResponse {
                partial_success: Some(ExportTracePartialSuccess {
                    rejected_spans: count.1,
                    error_message: p,
                }),
            }
            .encode_to_vec(),
            Signal::Logs => ExportLogsServiceResponse {
                partial_success: Some(ExportLogsPartialSuccess {
                    rejected_log_records: count.1,
                    error_message: p,
                }),
            }
            .encode_to_vec(),
        },
        // Written by hand: the crate's serializer writes `"partialSuccess": null`.
        Format::Json => serde_json::json!({"partialSuccess": {
            count.0: count.1.to_string(), "errorMessage": p}})
        .to_string()
        .into_bytes(),
    }
}

fn empty_answer<M: Message + Default>(format: Format) -> Vec<u8> {
    match format {
        Format::Protobuf => M::default().encode_to_vec(),
        Format::Json => b"{}".to_vec(),
    }
}

fn gunzip(b: &[u8], max: usize) -> Result<Vec<u8>, Refused> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .take(max as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| Refused::Malformed(format!("the gzip body cannot be read: {e}")))?;
    if out.len() > max {
        return Err(Refused::TooLarge);
    }
    Ok(out)
}

fn decode<M: Message + Default + serde::de::DeserializeOwned>(
    b: &[u8],
    format: Format,
) -> Result<M, Refused> {
    match format {
        Format::Protobuf => M::decode(b)
            .map_err(|e| Refused::Malformed(format!("not an OTLP protobuf export: {e}"))),
        Format::Json => serde_json::from_slice(b)
            .map_err(|e| Refused::Malformed(format!("not an OTLP/JSON export: {e}"))),
    }
}
