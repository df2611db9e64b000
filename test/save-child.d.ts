// Types of test/save-child.js (plain JS, so that a child process runs it on dist/ as it is).
import type { TensorInput } from '../src/node.ts'

export const TENSORS: number
export const ELEMENTS: number
export function shardCount(g: number): 1 | 2 | 3
export function generation(g: number): Array<TensorInput & { name: string; data: Int32Array }>
export function saveOptions(g: number): { maxShardSize: number }
