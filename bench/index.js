// npm run bench: every benchmark, each reporting ratios against a baseline measured in the same run.
for (const name of ['header', 'convert', 'quant', 'ggml', 'gguf', 'ggml-quantize', 'read', 'pool', 'write', 'io', 'model', 'ranks', 'download'])
  await (await import(`./${name}.js`)).run()
