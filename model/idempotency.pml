/*
 * The idempotency core and an idempotent consumer, as SPIN explores them: three copies of one request (a
 * double click, a retry after a lost answer, a retry after a 503) racing for one key, and one event the queue
 * delivers three times. The record's and the consume record's transitions come from generated.pml (from
 * src/server/db/machines.ts); this file says who calls them, as packages/idempotency/src/claim-*.ts and
 * src/server/fulfilment/consume.ts do. docs/model.md explains it.
 *
 * The key is claimed in one of the two ways the core has, chosen once per run (the operation's declaration):
 *   one transaction: claim, business writes and outcome commit together, or not at all (in a batch too:
 *                    a copy's savepoint commits with the batch or rolls back, and a copy that leaves a batch,
 *                    or whose whole batch failed, claims again alone);
 *   two phases:      the claim commits on its own with a lease (lease_version, locked_until); the holder does
 *                    its outside work, then its business writes and the outcome commit together, the outcome's
 *                    UPDATE conditional on its lease version (fencing): a holder whose lease was taken over
 *                    rolls back (IDEMPOTENCY_LEASE_LOST). A holder may die holding the key, or be slower than
 *                    its lease; a lease that ran out is taken over by a waiting copy.
 *
 * Defects the model must be able to find (npm run model:check -- --model=idempotency --defect=NAME):
 *   NO_FENCING                the outcome's UPDATE ignores the lease version: a holder taken over still
 *                             commits its business writes
 *   NO_TAKEOVER               a lease that ran out is never taken over: a holder that died keeps the key,
 *                             and its duplicates are told REQUEST_IN_PROGRESS forever (a liveness property
 *                             fails: an acceptance cycle)
 *   CONSUME_CHECK_THEN_INSERT the consumer asks whether the event was consumed, then inserts the record in
 *                             another step (no unique constraint deciding)
 */
#include "generated.pml"

#define NCOPY 3
#define MAXCRASH 1     /* copies that die holding the key */
#define MAXSLOW 2      /* times a live holder is slower than its lease */
#define MAXRELEASE 1   /* attempts that fail and free the key for a retry */
#define NDELIVERY 3

bool twoPhase;
bool copies;           /* this run races copies of a request (else: redelivers an event) */
bool chosen;           /* the story is chosen */
mtype record = I_NONE;
byte version;          /* lease_version */
bool leaseLive;        /* locked_until > now() */
byte holder;           /* the copy holding the current lease */
bool holderDead;
byte effects;          /* business writes committed under the key */
byte answered;
byte crashed;
byte slow;
byte released;
mtype firstAnswer = I_NONE;
bool ok;

mtype consumed[1] = K_NONE;
byte consumerEffects;
byte deliveriesDone;

/* A copy is answered: every answer to one key is the same stored outcome. */
inline answer(kind) {
  if
  :: firstAnswer == I_NONE -> firstAnswer = kind
  :: else -> assert(firstAnswer == kind)
  fi;
  answered++;
  got = true
}

/* The business writes of this key: once, and only by the holder of the current lease. */
inline businessWrite(mine) {
  effects++;
  assert(effects == 1);
  assert(version == mine)   /* a fenced holder never writes after a takeover */
}

proctype Copy(byte me) {
  byte mine;
  bool got;   /* this copy has its answer */
  bool left;  /* this copy left a batch (claim-in-batch.ts) and runs alone */
acquire:
  if
  /* one transaction: the claim, the business writes and the outcome, or nothing */
  :: atomic { !twoPhase && record == I_NONE ->
       if
       :: true -> idempotency_record_claim(ok); businessWrite(0); idempotency_record_succeed(ok); answer(I_SUCCESS)
       :: true -> idempotency_record_refuse(ok); answer(I_FAILED)  /* a declared refusal, stored */
       :: released < MAXRELEASE -> released++                       /* failed, rolled back: the key stays free */
       :: !left -> left = true   /* in a batch, nothing of it stays: its claim or business would wait and it
                                    was rolled back to its savepoint, or it was kept and the whole batch failed
                                    after it (a kept call's outcome past the batch's lock timeout: the batch
                                    rolls back). Either way it claims again alone (at most once) */
       fi }
     -> if :: got -> goto done :: else -> goto acquire fi
  /* two phases: the claim, with a lease */
  :: atomic { twoPhase && record == I_NONE -> idempotency_record_claim(ok); version++; mine = version;
              leaseLive = true; holder = me; holderDead = false }
     -> goto hold
  /* a stored outcome: replayed */
  :: atomic { record == I_SUCCESS || record == I_FAILED -> answer(record) } -> goto done
  /* a lease still held: the copy polls until its wait runs out, gets REQUEST_IN_PROGRESS, and its client
     sends it again */
#ifndef NO_TAKEOVER
  :: atomic { twoPhase && record == I_PROCESSING && leaseLive } -> goto acquire
#else
  :: atomic { twoPhase && record == I_PROCESSING } -> goto acquire
#endif
  /* a lease that ran out: taken over, with the next lease version */
#ifndef NO_TAKEOVER
  :: atomic { twoPhase && record == I_PROCESSING && !leaseLive -> idempotency_record_renewLease(ok); version++;
              mine = version; leaseLive = true; holder = me; holderDead = false }
     -> goto hold
#endif
  fi;
hold:
  /* The outside work (prepare), idempotent by its own key. The holder may die here, keeping the key. */
  if
  :: atomic { crashed < MAXCRASH -> crashed++; holderDead = (holder == me) } -> goto gone
  :: skip
  fi;
  /* The business transaction: writes, then the outcome fenced by the lease version, one commit. */
  if
  :: true -> atomic {
#ifdef NO_FENCING
       businessWrite(mine);
#endif
       if
       :: record == I_PROCESSING && version == mine ->
#ifndef NO_FENCING
          businessWrite(mine);
#endif
          idempotency_record_succeed(ok); leaseLive = false; answer(I_SUCCESS)
       :: else -> skip                                             /* IDEMPOTENCY_LEASE_LOST: rolled back */
       fi }
     -> if :: got -> goto done :: else -> goto acquire fi
  :: true -> atomic {
       if
       :: record == I_PROCESSING && version == mine -> idempotency_record_fail(ok); leaseLive = false;
          answer(I_FAILED)
       :: else -> skip
       fi }
     -> if :: got -> goto done :: else -> goto acquire fi
  /* A failure that is not the operation's to store: the key is freed (DELETE … WHERE lease_version = mine). */
  :: atomic { released < MAXRELEASE -> released++;
       if
       :: record == I_PROCESSING && version == mine -> idempotency_record_release(ok); leaseLive = false
       :: else -> skip
       fi }
     -> goto acquire
  fi;
done:
  skip;
gone:
  skip
}

/* Time: a dead holder's lease runs out; a live one's, when it is slower than its lease (bounded). */
active proctype Clock() {
end:
  do
  :: atomic { record == I_PROCESSING && leaseLive && holderDead -> leaseLive = false }
  :: atomic { record == I_PROCESSING && leaseLive && !holderDead && slow < MAXSLOW -> leaseLive = false; slow++ }
  od
}

/* One event delivered to one consumer, again and again (a crash after the commit, before the ack). */
proctype Delivery() {
#ifdef CONSUME_CHECK_THEN_INSERT
  bool seen;
  seen = (consumed[0] != K_NONE);
  if
  :: !seen -> atomic { consumed[0] = K_PROCESSING; consumerEffects++; assert(consumerEffects == 1);
                       consume_record_finish(0, ok) }
  :: else -> skip
  fi;
#else
  /* INSERT … ON CONFLICT DO NOTHING, the effect and DONE: one transaction; a duplicate finds the claim taken */
  atomic {
    consume_record_claim(0, ok);
    if
    :: ok -> consumerEffects++; assert(consumerEffects == 1); consume_record_finish(0, ok)
    :: else -> skip                                                 /* DUPLICATE */
    fi
  };
#endif
  atomic { deliveriesDone++ }
}

/* Each run is one of three stories (the two are independent: searched apart, their states add up instead of
   multiplying): copies of a request on a one-transaction key, on a two-phase key, or one event redelivered. */
init {
  byte n = 0;
  atomic {
    if
    :: copies = true; twoPhase = false
    :: copies = true; twoPhase = true
    :: copies = false
    fi;
    chosen = true;
    if
    :: copies -> run Copy(1); run Copy(2); run Copy(3)
    :: else -> do :: n < NDELIVERY -> run Delivery(); n++ :: else -> break od
    fi
  }
}

/* Every copy that did not die is answered, and the key ends decided: nobody waits forever. */
ltl everyone_answered { <> (chosen && (!copies || answered + crashed == NCOPY)) }
ltl key_decided { <> [] (chosen && (!copies || record == I_SUCCESS || record == I_FAILED)) }
/* The event's effect is applied, once, whatever the deliveries. */
ltl event_applied { <> (chosen && (copies || (consumed[0] == K_DONE && deliveriesDone == NDELIVERY))) }
