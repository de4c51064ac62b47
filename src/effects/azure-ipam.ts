// azure-ipam's facts the shim acts on, in one place (read from Azure/azure-container-networking: azure-ipam's
// ipam.go `CmdDel` and `watcherPath`, cns/fsnotify's `AddFile`): when CNS cannot be reached, its DEL writes a file
// named after the container ID into /var/run/azure-vnet/deleteIDs (content: the same ID), answers success, and CNS
// releases the addresses when it next runs and removes the file. A successful DEL is then no release yet.
import { lstatSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { isErrno } from './fs-atomic.js';

/** The delegate type this module's facts are about. */
export const AZURE_IPAM = 'azure-ipam';

/** The directory of Azure CNI's run state on a node: the DaemonSet mounts it, read only. */
export const AZURE_VNET_RUN_DIR = '/var/run/azure-vnet';

/** azure-ipam's `watcherPath`: where its DEL queues a container ID for CNS while CNS is down. */
const DELETE_QUEUE_DIR = `${AZURE_VNET_RUN_DIR}/deleteIDs`;

/**
 * Where this process sees that directory: the node's path, or IPAM_SHIM_AZURE_DELETE_QUEUE where the host's
 * /var/run is mounted elsewhere (the agent's container; the tests' stand-in).
 */
const deleteQueueDir = (env: NodeJS.ProcessEnv = process.env): string => env.IPAM_SHIM_AZURE_DELETE_QUEUE || DELETE_QUEUE_DIR;

/**
 * After azure-ipam answered a DEL of `containerID` with success: `queued` when its entry is in the queue (CNS was
 * down: nothing is released until CNS runs), `released` when the queue holds no such entry (or does not exist while
 * the directory above it does: CNS makes it at start when its async delete is on, and azure-ipam only creates the
 * file, so without it a queueing DEL fails rather than answering success), `unseen` when that cannot be looked into
 * (the directory above is not mounted here, or a read failed): then it cannot be told apart.
 */
export function azureDelOutcome(containerID: string, dir = deleteQueueDir()): 'queued' | 'released' | 'unseen' {
  try {
    if (!lstatSync(dir).isDirectory()) return 'unseen';
  } catch (e) {
    if (!isErrno(e, 'ENOENT')) return 'unseen';
    try {
      return lstatSync(dirname(dir)).isDirectory() ? 'released' : 'unseen';
    } catch {
      return 'unseen';
    }
  }
  try {
    lstatSync(join(dir, basename(containerID)));
    return 'queued';
  } catch (e) {
    return isErrno(e, 'ENOENT') ? 'released' : 'unseen';
  }
}
