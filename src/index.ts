/**
 * The portable entry (browsers, workerd, and the `default` condition): nothing in its module graph needs
 * Node; local files come with the Node entry (src/node.ts), whose types TypeScript under
 * `moduleResolution: "bundler"` takes where the project names the Node condition (`"customConditions": ["node"]`). Its modules have no side effects, so a bundler
 * keeps only those a page uses, with their wasm (src/core/wasm.ts).
 * @packageDocumentation
 */

export * from './api.ts'
