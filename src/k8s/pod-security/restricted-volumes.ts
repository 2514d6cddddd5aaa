/** restrictedVolumes (restricted): only the volume types that need no host or privileged access. */
import type { PodSecurityCheck, PodView } from './check.js';
import { joinQuote, list, name, pluralize, present, sortedSet } from './go-text.js';

/** The volume types restricted allows. */
const allowedVolumeTypes = ['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'image', 'persistentVolumeClaim', 'projected', 'secret'];
/** The restricted volume types, in the order upstream names a volume's type by (the first set; none known: `unknown`). */
const forbiddenVolumeTypes = [
  'hostPath',
  'gcePersistentDisk',
  'awsElasticBlockStore',
  'gitRepo',
  'nfs',
  'iscsi',
  'glusterfs',
  'rbd',
  'flexVolume',
  'cinder',
  'cephfs',
  'flocker',
  'fc',
  'azureFile',
  'vsphereVolume',
  'quobyte',
  'azureDisk',
  'photonPersistentDisk',
  'portworxVolume',
  'scaleIO',
  'storageos',
];

function check({ spec }: PodView) {
  // A source counts when it is set, as upstream's `volume.EmptyDir != nil`: `emptyDir: null` is no emptyDir.
  const badVolumes = list(spec.volumes).filter((v) => !allowedVolumeTypes.some((type) => present(v[type])));
  if (badVolumes.length === 0) return undefined;
  const types = sortedSet(badVolumes.map((v) => forbiddenVolumeTypes.find((type) => present(v[type])) ?? 'unknown'));
  return {
    reason: 'restricted volume types',
    detail: `${pluralize('volume', 'volumes', badVolumes.length)} ${joinQuote(badVolumes.map(name))} ${pluralize('uses', 'use', badVolumes.length)} ${pluralize('restricted volume type', 'restricted volume types', types.length)} ${joinQuote(types)}`,
  };
}

export const restrictedVolumes: PodSecurityCheck = {
  id: 'restrictedVolumes',
  level: 'restricted',
  forbids: 'volume types other than configMap, csi, downwardAPI, emptyDir, ephemeral, image, persistentVolumeClaim, projected, secret',
  versions: [{ since: 0, overrides: ['hostPathVolumes'], check }],
};
