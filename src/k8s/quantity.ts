/**
 * Kubernetes quantities (`100m`, `64Mi`, `1.5`, `2e3`) as exact fractions: compared and added
 * without floating point. Pure.
 */

export const quantityRe = /^([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?\d{1,3}))?$/;
const binary: Record<string, number> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };
const decimal: Record<string, number> = { n: -9, u: -6, m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };

/** A quantity's exact value `num / den` (`den` a power of ten), and whether it was written with a binary suffix. */
export interface Quantity {
  readonly num: bigint;
  readonly den: bigint;
  readonly binary: boolean;
}

/**
 * Quantities read lately, by their text: pods and templates write the same few (`250m`,
 * `64Mi`) in every review, and a decision reads each several times (QoS before and after,
 * resource growth). Bounded; cleared when full. A Map: the keys are request data.
 */
const parsed = new Map<string, Quantity | undefined>();
const maxParsed = 1024;

/** The quantity `value` writes, or undefined when it is not one (numbers are read as their decimal text). */
export function parseQuantity(value: unknown): Quantity | undefined {
  const text = typeof value === 'number' && Number.isFinite(value) ? String(value) : value;
  if (typeof text !== 'string' || text.length > 64) return undefined;
  const known = parsed.get(text);
  if (known !== undefined || parsed.has(text)) return known;
  if (parsed.size >= maxParsed) parsed.clear();
  const quantity = readQuantity(text);
  parsed.set(text, quantity);
  return quantity;
}

const nano = 10n ** 9n;

function readQuantity(text: string): Quantity | undefined {
  const m = quantityRe.exec(text);
  if (!m) return undefined;
  const [, sign, digits, suffix, exponent] = m;
  const [whole, fraction = ''] = digits!.split('.');
  let num = BigInt(`${whole || '0'}${fraction}`) * (sign === '-' ? -1n : 1n);
  let den = 10n ** BigInt(fraction.length);
  const isBinary = suffix !== undefined && binary[suffix] !== undefined;
  const scale = suffix ? decimal[suffix] : exponent ? Number(exponent) : 0;
  if (isBinary) num *= 2n ** BigInt(binary[suffix]!);
  else if (scale !== undefined && scale > 0) num *= 10n ** BigInt(scale);
  else if (scale !== undefined && scale < 0) den *= 10n ** BigInt(-scale);
  // As the API server reads it (resource.ParseQuantity): a value finer than 1n is rounded up,
  // away from zero, to the next nano, so 0.0999999999999 is 100m to both and a bound compares alike.
  if (den > nano) {
    const magnitude = num < 0n ? -num : num;
    const rounded = (magnitude * nano + den - 1n) / den;
    return Object.freeze({ num: num < 0n ? -rounded : rounded, den: nano, binary: isBinary });
  }
  return Object.freeze({ num, den, binary: isBinary });
}

/** True when both are quantities of the same value. */
export function sameQuantity(a: unknown, b: unknown): boolean {
  const qa = parseQuantity(a);
  if (!qa) return false;
  const qb = parseQuantity(b);
  return qb !== undefined && qa.num * qb.den === qb.num * qa.den;
}

/** The sum; binary when either is. */
export function addQuantities(a: Quantity, b: Quantity): Quantity {
  const den = a.den > b.den ? a.den : b.den;
  return { num: a.num * (den / a.den) + b.num * (den / b.den), den, binary: a.binary || b.binary };
}

/** `a <= b`. */
export function quantityAtMost(a: Quantity, b: Quantity): boolean {
  return a.num * b.den <= b.num * a.den;
}

/**
 * The shortest exact text of a quantity in the canonical suffixes: binary (`Ki`…`Ei`) for a
 * binary whole number, else decimal (`k`…`E`, or `m`, `u`, `n` for fractions). A value finer
 * than `n` is rounded up to it, as the API server does.
 */
export function formatQuantity(q: Quantity): string {
  const negative = q.num < 0n;
  const abs = negative ? -q.num : q.num;
  const sign = negative ? '-' : '';
  if (abs % q.den === 0n) {
    const whole = abs / q.den;
    if (whole === 0n) return '0';
    if (q.binary) {
      for (const [suffix, bits] of Object.entries(binary).reverse()) {
        if (whole % 2n ** BigInt(bits) === 0n) return `${sign}${whole / 2n ** BigInt(bits)}${suffix}`;
      }
    }
    for (const suffix of ['E', 'P', 'T', 'G', 'M', 'k']) {
      const unit = 10n ** BigInt(decimal[suffix]!);
      if (whole % unit === 0n) return `${sign}${whole / unit}${suffix}`;
    }
    return `${sign}${whole}`;
  }
  for (const suffix of ['m', 'u', 'n']) {
    const per = 10n ** BigInt(-decimal[suffix]!);
    if ((abs * per) % q.den === 0n) return `${sign}${(abs * per) / q.den}${suffix}`;
  }
  return `${sign}${(abs * 10n ** 9n + q.den - 1n) / q.den}n`;
}
