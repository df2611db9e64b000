// Types of examples/ranks.js, for the tests that run it.
import type { OpenModelOptions, Tensor } from '../src/index.ts'

export function splitOf(name: string, shape: number[]): 'rows' | 'columns' | null
export function shareOf(shape: number[], split: 'rows' | 'columns' | null, rank: number, ranks: number): Array<[number, number] | null>
export function loadRank(where: string | URL, rank: number, ranks: number, options?: OpenModelOptions): Promise<{ rank: number; tensors: Map<string, Tensor>; bytes: number; requests: number; ms: number }>
