// `#workers` in browsers, workerd and any other runtime (every condition but `node`): the conversion pool's
// workers in pages and Web Workers (none in workerd, which has no Worker): classic Web Workers started from a Blob URL of the
// pool's function text. So every bundler works without configuration (there is no worker file to emit), and
// where a Content-Security-Policy forbids blob: workers, their start fails and reads stay on the calling thread.
import type { Workers } from './platform.ts'

const webWorkers: Workers = {
  cores: () => (globalThis as { navigator?: { hardwareConcurrency?: number } }).navigator?.hardwareConcurrency ?? 1,
  // Isolation alone is not enough: WebKitGTK's MiniBrowser is crossOriginIsolated with no SharedArrayBuffer.
  sharedMemory: () => (globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated === true && typeof SharedArrayBuffer === 'function',
  start(body, onMessage, onError) {
    const url = URL.createObjectURL(
      new Blob([`(${body})((handle) => { self.onmessage = (event) => handle(event.data) }, (message, transfer) => self.postMessage(message, transfer))`], {
        type: 'text/javascript',
      }),
    )
    let worker: Worker
    try {
      worker = new Worker(url)
    } finally {
      // The worker has fetched its script (or failed to) once it starts; the URL is not needed after.
      setTimeout(() => URL.revokeObjectURL(url), 10_000)
    }
    worker.onmessage = (event) => onMessage(event.data)
    worker.onerror = (event) => {
      event.preventDefault()
      onError(new Error(event.message || 'the worker could not start'))
    }
    return {
      post: (message, transfer) => worker.postMessage(message, transfer ?? []),
      hold: () => {},
      terminate: () => worker.terminate(),
    }
  },
}

export const workers: Workers | undefined = typeof Worker === 'function' && typeof URL.createObjectURL === 'function' ? webWorkers : undefined
