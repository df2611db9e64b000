// `#workers` under Node, Deno and Bun (the `node` condition): the conversion pool's workers are worker_threads,
// each started from the pool's function text (eval), so that no file of the package has to be found at run time.
import { availableParallelism } from 'node:os'
import { Worker } from 'node:worker_threads'
import type { Workers } from './platform.ts'

export const workers: Workers | undefined = {
  cores: () => availableParallelism(),
  sharedMemory: () => true,
  start(body, onMessage, onError) {
    const worker = new Worker(
      // A script, or a module where the process says evaluated code is one (node --input-type=module): there
      // is no require there, but process.getBuiltinModule.
      `const load = typeof require === 'function' ? require : process.getBuiltinModule;
      const { parentPort } = load('node:worker_threads');
      (${body})((handle) => parentPort.on('message', handle), (message, transfer) => parentPort.postMessage(message, transfer), load('node:fs'))`,
      { eval: true },
    )
    worker.on('message', onMessage)
    worker.on('error', onError)
    worker.on('exit', (code) => onError(new Error(`the worker exited with code ${code}`)))
    // After the listeners, which ref the worker: idle workers never keep the process alive, so a script
    // that reads and returns exits at once.
    worker.unref()
    return {
      post: (message, transfer) => worker.postMessage(message, transfer as never),
      hold: (busy) => (busy ? worker.ref() : worker.unref()),
      terminate: () => void worker.terminate(),
    }
  },
}
