/**
 * Bytes a benchmarked server allocates on V8's heap, loaded into it with `--import`. The first
 * SIGUSR2 opens a window, the next closes it and writes `{"window":N,"allocatedBytes":B}` to
 * the file named by BENCH_ALLOCATION_FILE. V8 counts no allocation itself (heap statistics are
 * the live heap), so it is read from the garbage collections in the window: what each
 * collection found in use, less what the one before it left, plus the growth since the last one.
 * Counts V8's heap only: Buffers' bytes (the request and answer bodies) are outside it.
 */
import { writeFileSync } from 'node:fs';
import v8 from 'node:v8';

interface GcRecord {
  readonly beforeGC: { readonly heapStatistics: { readonly usedHeapSize: number } };
  readonly afterGC: { readonly heapStatistics: { readonly usedHeapSize: number } };
}

const file = process.env.BENCH_ALLOCATION_FILE;
if (file) {
  let profiler: v8.GCProfiler | undefined;
  let usedAtStart = 0;
  let window = 0;
  process.on('SIGUSR2', () => {
    if (!profiler) {
      profiler = new v8.GCProfiler();
      usedAtStart = v8.getHeapStatistics().used_heap_size;
      profiler.start();
      return;
    }
    const records = (profiler.stop()?.statistics ?? []) as unknown as GcRecord[];
    const usedAtEnd = v8.getHeapStatistics().used_heap_size;
    profiler = undefined;
    let allocated = 0;
    let leftBefore = usedAtStart;
    for (const gc of records) {
      allocated += Math.max(0, gc.beforeGC.heapStatistics.usedHeapSize - leftBefore);
      leftBefore = gc.afterGC.heapStatistics.usedHeapSize;
    }
    allocated += Math.max(0, usedAtEnd - leftBefore);
    writeFileSync(file, JSON.stringify({ window: ++window, allocatedBytes: allocated }));
  });
}
