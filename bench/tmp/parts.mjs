import { reviewText } from '/work/main/dist/bench/reviews.js';
import { jsonDepthExceeds } from '/work/main/dist/src/http/body.js';
for (const size of ['typical','large']) {
const text = reviewText(size); const buf = Buffer.from(text);
const td = new TextDecoder('utf-8', {fatal:true});
const time = (name, fn) => { for (let i=0;i<2000;i++) fn(); const t0=performance.now(); const N=5000; for (let i=0;i<N;i++) fn(); console.log(size, name, ((performance.now()-t0)/N*1000).toFixed(1),'us'); };
time('depth', () => jsonDepthExceeds(buf, 1000));
time('decode', () => td.decode(buf));
time('toString', () => buf.toString('utf8'));
time('parse', () => JSON.parse(text));
time('isUtf8', () => Buffer.isUtf8 ? Buffer.isUtf8(buf) : 0);
}
