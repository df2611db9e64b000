// Types of scripts/inspector.js for the TypeScript tests that start the server.
export function startInspectorServer(options?: { port?: number }): Promise<{ url: string; close(): Promise<void> }>
