#!/usr/bin/env node
// A real MCP client on npm @modelcontextprotocol/client 2.4.0 (the v2 TypeScript SDK), driven
// by argv, for the gateway's tests. Same contract as py_client.py:
//
//   node ts_client.mjs [OPTIONS] stdio -- CMD ARGS...
//   node ts_client.mjs [OPTIONS] http URL [OPTIONS]
//
//   --protocol auto|2025-11-25|2026-07-28   (default auto: server/discover, fall back to
//                                          initialize; 2025-11-25: initialize only;
//                                          2026-07-28: server/discover only, no fallback)
//   --read-resource URI                     repeatable, done before the calls
//   --call TOOL JSON_ARGS                   repeatable, done in order
//   --elicitation none|accept|decline       none (default) = capability not declared
//   --header K:V                            repeatable, extra HTTP header
//   --meta JSON                             extra `_meta` keys on every tools/call
//   --timeout-ms N                          each call's request timeout (the SDK then sends
//                                          notifications/cancelled for it)
//
// Prints ONE JSON object on stdout at the end: {protocol, server: {name, version}, tools,
// resources, calls: [{tool, isError, content, structuredContent, error}], elicitations};
// everything else goes to stderr. The stdio server inherits our whole environment.
// Note: with --protocol auto on stdio, the SDK runs the server/discover probe on a short-lived
// extra copy of the server process, then starts the real one.

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

function usage(msg) {
  console.error(`ts_client.mjs: ${msg}\nusage: ts_client.mjs [OPTIONS] stdio -- CMD ARGS... | http URL`);
  process.exit(2);
}

function parseArgs(argv) {
  const dash = argv.indexOf('--');
  const command = dash >= 0 ? argv.slice(dash + 1) : [];
  const args = dash >= 0 ? argv.slice(0, dash) : argv;
  const o = { protocol: 'auto', calls: [], reads: [], elicitation: 'none', headers: {}, meta: undefined, command };
  const positional = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const next = () => (i + 1 < args.length ? args[++i] : usage(`${a} needs a value`));
    if (a === '--protocol') o.protocol = next();
    else if (a === '--call') o.calls.push([next(), JSON.parse(next())]);
    else if (a === '--read-resource') o.reads.push(next());
    else if (a === '--elicitation') o.elicitation = next();
    else if (a === '--header') {
      const h = next();
      const c = h.indexOf(':');
      o.headers[h.slice(0, c).trim()] = h.slice(c + 1).trim();
    } else if (a === '--meta') o.meta = JSON.parse(next());
    else if (a === '--timeout-ms') o.timeoutMs = Number(next());
    else if (a.startsWith('--')) usage(`unknown option ${a}`);
    else positional.push(a);
  }
  [o.transport, o.url] = positional;
  if (!['auto', '2025-11-25', '2026-07-28'].includes(o.protocol)) usage('bad --protocol');
  if (!['none', 'accept', 'decline'].includes(o.elicitation)) usage('bad --elicitation');
  if (o.transport === 'stdio' && command.length === 0) usage('stdio needs a server command after --');
  if (o.transport === 'http' && !o.url) usage('http needs a URL');
  if (!['stdio', 'http'].includes(o.transport)) usage('transport must be stdio or http');
  return o;
}

// An "accept" answer to a form: booleans true, else the field's default, else a placeholder
// for required strings (so validating servers accept it). Same rule as py_client.py.
function fillForm(schema = {}) {
  const required = new Set(schema.required ?? []);
  const answer = {};
  for (const [name, prop] of Object.entries(schema.properties ?? {})) {
    if (prop.type === 'boolean') answer[name] = true;
    else if ('default' in prop) answer[name] = prop.default;
    else if (required.has(name) && prop.type === 'string') answer[name] = 'afr-test';
  }
  return answer;
}

// Error text for a call: a JSON-RPC error keeps its message; anything else "Name: message".
const describe = (e) => (typeof e?.code === 'number' ? e.message : `${e?.name ?? 'Error'}: ${e?.message ?? e}`);

async function run(o) {
  const out = { protocol: null, server: null, tools: [], resources: [], calls: [], elicitations: [] };

  const mode = { auto: 'auto', '2025-11-25': 'legacy', '2026-07-28': { pin: '2026-07-28' } }[o.protocol];
  const client = new Client(
    { name: 'afr-ts-client', version: '0.1.0' },
    {
      capabilities: o.elicitation === 'none' ? {} : { elicitation: { form: {} } },
      versionNegotiation: { mode }, // the SDK's default is 'legacy'
    },
  );
  if (o.elicitation !== 'none') {
    // Serves both generations: 2025-11-25 elicitation/create requests, and 2026-07-28
    // input_required rounds, which the SDK fulfils through this same handler.
    client.setRequestHandler('elicitation/create', async (request) => {
      out.elicitations.push({ message: request.params.message, action: o.elicitation });
      if (o.elicitation === 'decline') return { action: 'decline' };
      return { action: 'accept', content: fillForm(request.params.requestedSchema) };
    });
  }

  const transport =
    o.transport === 'stdio'
      ? new StdioClientTransport({ command: o.command[0], args: o.command.slice(1), env: { ...process.env }, stderr: 'inherit' })
      : new StreamableHTTPClientTransport(new URL(o.url), { requestInit: { headers: o.headers } });

  await client.connect(transport);
  try {
    out.protocol = client.getNegotiatedProtocolVersion() ?? null;
    const info = client.getServerVersion();
    if (info) out.server = { name: info.name, version: info.version };

    out.tools = (await client.listTools()).tools.map((t) => t.name); // all pages

    for (const uri of o.reads) {
      const entry = { uri, contents: null, error: null };
      try {
        entry.contents = (await client.readResource({ uri }, { cacheMode: 'bypass' })).contents;
      } catch (e) {
        entry.error = describe(e);
      }
      out.resources.push(entry);
    }

    for (const [tool, args] of o.calls) {
      const call = { tool, isError: null, content: null, structuredContent: null, error: null };
      try {
        const params = { name: tool, arguments: args, ...(o.meta ? { _meta: o.meta } : {}) };
        const r = await client.callTool(params, o.timeoutMs ? { timeout: o.timeoutMs } : undefined);
        call.isError = r.isError ?? false;
        call.content = r.content ?? null;
        call.structuredContent = r.structuredContent ?? null;
      } catch (e) {
        call.error = describe(e); // a JSON-RPC error response, or a client-side failure
      }
      out.calls.push(call);
    }
  } finally {
    await client.close();
  }
  return out;
}

const o = parseArgs(process.argv.slice(2));
// Keep stdout for the one JSON object: route any console.log (ours or a library's) to stderr.
const writeOut = (s) => process.stdout.write(s + '\n');
console.log = (...a) => console.error(...a);
try {
  writeOut(JSON.stringify(await run(o)));
  process.exit(0);
} catch (e) {
  writeOut(JSON.stringify({ error: describe(e) }));
  process.exit(1);
}
