/**
 * The Node entry (also Deno and Bun, which resolve the `node` condition): the portable API plus local
 * files: paths in open() and openModel(), and the functions that write to disk.
 * @packageDocumentation
 */
export * from './index.ts'
export { fileSink, writeFile } from './node/atomic-files.ts'
export { type ConvertFileOptions, convertFile, convertModel } from './node/convert-file.ts'
export { type SaveModelOptions, saveModel } from './node/save-model.ts'
export { fileSource } from './platform/node-files.ts'
