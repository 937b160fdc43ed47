/*
 * maintenance.c — sys/maintenance_status (RFC 0002): the last
 * MR_VALUE_MAX_PASSES maintenance passes, oldest first, each with its start
 * time, trigger and step outcomes. Two writers append to it: moraine's own
 * expiry (expire.c, as its own batch) and a DuckLake commit that expired
 * snapshots or flushed inlined rows (commit.c, inside that commit's batch,
 * so the record and what it describes land together or not at all).
 *
 * Also here: store_flush_if_wanted, the memtable flush after such a commit.
 *
 * Invariant: the record is rewritten whole; a pass is never edited after it
 * is written.
 */
#include "store/store_internal.h"

#include <stdlib.h>
#include <string.h>

mr_status store_maintenance_append(store *st, kv_batch *b, int64_t start_us, const char *trigger,
                                   const store_maint_step *steps, size_t nsteps, mr_error *err) {
  if (nsteps > STORE_MAINT_MAX_STEPS)
    return mr_fail(err, MR_ERR_INVALID, "store_maintenance_append: %zu steps (at most %d)", nsteps,
                   STORE_MAINT_MAX_STEPS);
  mr_key k = {.kind = MR_KK_SYS_MAINTENANCE};
  ProtobufCMessage *m = NULL;
  mr_status rc = store_get_msg(st, &k, &m, err);
  if (rc && rc != MR_ERR_NOT_FOUND)
    return rc;
  mr_error_clear(err);
  Moraine__V1__MaintenanceStatus empty = MORAINE__V1__MAINTENANCE_STATUS__INIT;
  Moraine__V1__MaintenanceStatus *old = m ? (Moraine__V1__MaintenanceStatus *)m : &empty;

  Moraine__V1__MaintenanceStep step_msgs[STORE_MAINT_MAX_STEPS], *step_ptrs[STORE_MAINT_MAX_STEPS];
  for (size_t i = 0; i < nsteps; i++) {
    moraine__v1__maintenance_step__init(&step_msgs[i]);
    step_msgs[i].name = (char *)steps[i].name;
    step_msgs[i].outcome = (char *)steps[i].outcome;
    step_msgs[i].detail = (char *)steps[i].detail;
    step_ptrs[i] = &step_msgs[i];
  }
  Moraine__V1__MaintenancePass pass = MORAINE__V1__MAINTENANCE_PASS__INIT;
  pass.start_time_us = start_us;
  pass.trigger = (char *)trigger;
  pass.n_step = nsteps;
  pass.step = step_ptrs;

  Moraine__V1__MaintenancePass *passes[MR_VALUE_MAX_PASSES];
  size_t skip = old->n_pass >= MR_VALUE_MAX_PASSES ? old->n_pass - (MR_VALUE_MAX_PASSES - 1) : 0;
  size_t n = 0;
  for (size_t i = skip; i < old->n_pass; i++)
    passes[n++] = old->pass[i];
  passes[n++] = &pass;
  Moraine__V1__MaintenanceStatus ms = MORAINE__V1__MAINTENANCE_STATUS__INIT;
  ms.n_pass = n;
  ms.pass = passes;

  mr_keybuf kb;
  uint8_t *val = NULL;
  size_t len = 0;
  rc = store_key_bytes(&k, &kb, err);
  if (!rc)
    rc = mr_value_encode(MR_KK_SYS_MAINTENANCE, &ms.base, &val, &len, err);
  if (!rc)
    rc = kv_batch_put(b, kb.b, kb.len, val, len, err);
  free(val);
  mr_value_free(m);
  return rc;
}

mr_status store_flush_if_wanted(store *st, mr_error *err) {
  if (st->read_only || !atomic_exchange(&st->flush_wanted, false))
    return MR_OK;
  mr_status rc = kv_flush(st->db, err);
  if (rc)
    atomic_store(&st->flush_wanted, true); /* the next round tries again */
  return rc;
}
