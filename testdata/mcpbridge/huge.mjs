// A stdio MCP server (the official TS SDK) whose tool "huge" answers with
// a result larger than the gateway's stdio frame limit (16 MiB), beside an
// ordinary "echo": the bridge must fail that one call and keep using the
// server (mcpbridge/oversize_test.go).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const server = new McpServer({ name: 'huge', version: '1.0.0' });
server.tool('huge', 'Returns 17 MiB of text.', {}, async () => ({
  content: [{ type: 'text', text: 'x'.repeat(17 * 1024 * 1024) }],
}));
server.tool('echo', 'Echoes.', { message: z.string() }, async ({ message }) => ({
  content: [{ type: 'text', text: `Echo: ${message}` }],
}));
await server.connect(new StdioServerTransport());
