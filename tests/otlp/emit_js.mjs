#!/usr/bin/env node
// Hand-built GenAI spans, exported by the REAL OpenTelemetry JS SDK over OTLP/HTTP with JSON
// bodies: @opentelemetry/exporter-trace-otlp-http (it sends `Content-Type: application/json`;
// the protobuf exporter is a separate package), pinned in tests/otlp/package-lock.json and
// installed by scripts/setup.sh (npm ci).
//
// One trace, one request (BatchSpanProcessor, forceFlush, shutdown):
//
//   invoke_agent planner        INTERNAL  gen_ai.agent.name, gen_ai.conversation.id
//   ├─ chat gpt-4o              CLIENT    gen_ai.request.model
//   ├─ execute_tool get_weather INTERNAL  gen_ai.tool.{name,call.id,call.arguments,call.result}
//   └─ execute_tool delete_file INTERNAL  status ERROR "permission denied: /etc/passwd"
//
// Prints one JSON line {"ok", "trace_id", "conversation_id", "spans": [{name, span_id}], "exports"}
// and exits 1 when an export failed (the exporter's result code), 2 on bad arguments.
//
//   node tests/otlp/emit_js.mjs --endpoint http://127.0.0.1:4318 [--header K=V] [--timeout 10] [--gzip]
//
// --endpoint is the receiver's base URL (/v1/traces is appended) or a URL with a path (used as
// is): the exporter's `url` option is the full URL of the traces endpoint.

import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';

import { SpanKind, SpanStatusCode, context, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';

function usage(msg) {
  process.stderr.write(`emit_js.mjs: ${msg}\n`);
  process.exit(2);
}

let opts;
try {
  ({ values: opts } = parseArgs({
    options: {
      endpoint: { type: 'string', default: 'http://127.0.0.1:4318' },
      header: { type: 'string', multiple: true, default: [] },
      timeout: { type: 'string', default: '10' },
      gzip: { type: 'boolean', default: false },
      'service-name': { type: 'string', default: 'afr-otlp-js' },
      'conversation-id': { type: 'string' },
    },
  }));
} catch (e) {
  usage(e.message);
}

/** The traces URL: a base URL gets /v1/traces, a URL with a path is used as is. */
function tracesUrl(endpoint) {
  const u = new URL(endpoint);
  if (u.pathname === '' || u.pathname === '/') {
    return endpoint.replace(/\/+$/, '') + '/v1/traces';
  }
  return endpoint;
}

const headers = {};
for (const h of opts.header) {
  const at = h.indexOf('=');
  if (at <= 0) usage(`--header wants K=V, got ${JSON.stringify(h)}`);
  headers[h.slice(0, at)] = h.slice(at + 1);
}
const conversation = opts['conversation-id'] ?? randomUUID();

const inner = new OTLPTraceExporter({
  url: tracesUrl(opts.endpoint),
  headers,
  timeoutMillis: Math.round(Number(opts.timeout) * 1000),
  ...(opts.gzip ? { compression: 'gzip' } : {}),
});

// The exporter's own result of each export (the processor only logs a failure).
const exports = [];
const exporter = {
  export(spans, done) {
    inner.export(spans, (result) => {
      exports.push({
        spans: spans.length,
        code: result.code, // ExportResultCode: 0 SUCCESS, 1 FAILED
        ...(result.error ? { error: String(result.error.message ?? result.error) } : {}),
      });
      done(result);
    });
  },
  shutdown: () => inner.shutdown(),
  forceFlush: () => inner.forceFlush(),
};

const provider = new BasicTracerProvider({
  resource: defaultResource().merge(resourceFromAttributes({ 'service.name': opts['service-name'] })),
  spanProcessors: [new BatchSpanProcessor(exporter)],
});
const tracer = provider.getTracer('afr.emit_js', '1.0.0');

const spans = [];
function started(name, options, parent) {
  const ctx = parent ? trace.setSpan(context.active(), parent) : context.active();
  const span = tracer.startSpan(name, options, ctx);
  spans.push({ name, span_id: span.spanContext().spanId });
  return span;
}

const root = started('invoke_agent planner', {
  kind: SpanKind.INTERNAL,
  attributes: {
    'gen_ai.operation.name': 'invoke_agent',
    'gen_ai.agent.name': 'planner',
    'gen_ai.conversation.id': conversation,
  },
});

const chat = started(
  'chat gpt-4o',
  {
    kind: SpanKind.CLIENT,
    attributes: {
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'gpt-4o',
      'gen_ai.usage.input_tokens': 42,
      'gen_ai.usage.output_tokens': 7,
    },
  },
  root,
);
chat.end();

const weather = started(
  'execute_tool get_weather',
  {
    kind: SpanKind.INTERNAL,
    attributes: {
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'get_weather',
      'gen_ai.tool.type': 'function',
      'gen_ai.tool.call.id': 'call_js_1',
      'gen_ai.tool.call.arguments': JSON.stringify({ city: 'Paris' }),
      'gen_ai.tool.call.result': JSON.stringify({ temp_c: 21.5, sky: 'clear' }),
    },
  },
  root,
);
weather.end();

const failed = started(
  'execute_tool delete_file',
  {
    kind: SpanKind.INTERNAL,
    attributes: {
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'delete_file',
      'gen_ai.tool.call.id': 'call_js_2',
      'gen_ai.tool.call.arguments': JSON.stringify({ path: '/etc/passwd' }),
    },
  },
  root,
);
const err = new Error('permission denied: /etc/passwd');
err.name = 'PermissionError';
failed.recordException(err);
failed.setAttribute('error.type', 'PermissionError');
failed.setStatus({ code: SpanStatusCode.ERROR, message: 'permission denied: /etc/passwd' });
failed.end();

root.end();

// forceFlush rejects when an export failed; the result codes above say which.
let flushError = null;
try {
  await provider.forceFlush();
} catch (e) {
  flushError = String(e?.message ?? e);
}
await provider.shutdown();

const ok = flushError === null && exports.length > 0 && exports.every((e) => e.code === 0);
process.stdout.write(
  JSON.stringify({
    ok,
    trace_id: root.spanContext().traceId,
    conversation_id: conversation,
    spans,
    exports,
    ...(flushError ? { flush_error: flushError } : {}),
  }) + '\n',
);
process.exitCode = ok ? 0 : 1;
