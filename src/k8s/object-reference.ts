/** A reference to a Kubernetes object, as an Event's `regarding` names it. */
export interface ObjectReference {
  readonly apiVersion: string;
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  readonly uid?: string;
}
