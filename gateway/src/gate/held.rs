//! Held calls: waiting for a human's decision (the approval queue or the client's own
//! elicitation), checking a signed approval, and recording what was decided.

use super::*;

impl Gate {
    pub(super) fn hold(
        &self,
        session: &Session,
        call: ToolCall,
        evaluation: Evaluation,
        key: String,
    ) -> Admission {
        let id = approvals::new_id();
        let now = now_us();
        let timeout_us = u64::try_from(self.approval_timeout.as_micros()).unwrap_or(u64::MAX);
        // What an approval signs: the intent and execution recorded if the call runs.
        let runs = self.approved_event(session, &call, &evaluation, None);
        let recorder = lock(&self.door)
            .as_mut()
            .and_then(|d| d.recorder_id().ok())
            .map(|r| format!("0x{}", hex::encode(r)))
            .unwrap_or_default();
        let pending = PendingCall {
            intent: serde_json::to_value(&runs.intent).unwrap_or_default(),
            execution: runs
                .execution
                .as_ref()
                .and_then(|e| serde_json::to_value(e).ok())
                .unwrap_or_default(),
            action: action_of(&runs),
            recorder,
            signed_by: evaluation
                .signed_by
                .iter()
                .map(|a| a.name.clone())
                .collect(),
            prompt: prompt(session, &call, &evaluation, &id, self.approval_timeout),
            id,
            tool: call.tool.clone(),
            arguments: call.args.clone(),
            server: session.target(),
            lane: session.lane.clone(),
            rule: evaluation.guardrail.clone(),
            created_at_us: now,
            expires_at_us: now.saturating_add(timeout_us),
            pid: std::process::id(),
        };
        if let Err(e) = approvals::submit(&self.dir, &pending) {
            warn(&format!("call of `{}` could not be queued: {e}", call.tool));
            let r = Refusal {
                code: code::REJECTED,
                message: format!(
                    "afr gateway: the call needs approval and could not be queued: {e}"
                ),
            };
            let mut ev = session.intent_event(
                &call.tool,
                &call.args,
                &call.params,
                Some(&evaluation),
                Stage::Held,
            );
            ev.effects = Some(Effects {
                error: Some(r.message.clone()),
                ..Effects::default()
            });
            if let Err(err) = self.record(&key, &ev) {
                warn(&format!(
                    "the refusal of `{}` was not recorded: {err}",
                    call.tool
                ));
            }
            return Admission::Refuse(r);
        }
        self.held_ids().insert(pending.id.clone());
        warn(&format!(
            "call of `{}` held for approval: afr approve {} (or afr reject {})",
            call.tool, pending.id, pending.id
        ));
        Admission::Hold(Box::new(Held {
            call,
            evaluation,
            pending,
            key,
        }))
    }

    fn held_ids(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits (blocking) for the first of: a decision in the queue, one from `elicited` (the
    /// client's answer to an elicitation), or the timeout, which rejects.
    pub fn wait(&self, held: &Held, elicited: Option<&Receiver<Ruling>>) -> Ruling {
        let id = &held.pending.id;
        loop {
            match approvals::decision(&self.dir, id) {
                Ok(Some(r)) => return r,
                Ok(None) => {}
                // A half-written or unreadable decision is not a decision; say so and wait on.
                Err(e) => warn(&format!("approval {id}: {e}")),
            }
            // The gateway's own rejection: it stops, or nobody decided in time.
            let why = if self.stopping.load(Ordering::Relaxed) {
                Some("the gateway stopped before a decision".to_owned())
            } else if now_us() >= held.pending.expires_at_us {
                Some(format!(
                    "no decision within {} s",
                    self.approval_timeout.as_secs()
                ))
            } else {
                None
            };
            if let Some(reason) = why {
                let own = Ruling {
                    decision: Decision::Rejected,
                    approver: "afr-gateway".into(),
                    decided_at_us: now_us(),
                    reason: Some(reason),
                    signature: None,
                };
                return approvals::claim(&self.dir, id, own);
            }
            match elicited.map(|rx| rx.recv_timeout(POLL)) {
                // The client's answer is a decision like any other: the first one wins.
                Some(Ok(r)) => return approvals::claim(&self.dir, id, r),
                Some(Err(_)) => {}
                None => std::thread::sleep(POLL),
            }
        }
    }

    /// Takes the decision on a held call: an approved call is journaled again with its
    /// approval and execution (synced) and may then be forwarded; a rejected one gets its
    /// event now and is answered with an error.
    pub fn conclude(
        &self,
        session: &Session,
        held: Held,
        ruling: &Ruling,
    ) -> Result<Forward, Refusal> {
        approvals::remove(&self.dir, &held.pending.id);
        self.held_ids().remove(&held.pending.id);
        let call = &held.call;
        if approvals::is_cancelled_by_client(ruling) {
            // Nobody decided: the client gave up first. Recorded as cancelled, never run.
            let why = match &ruling.reason {
                Some(r) => format!(
                    "cancelled by the client before a decision ({r}); not forwarded to the server"
                ),
                None => "cancelled by the client before a decision; not forwarded to the server"
                    .to_owned(),
            };
            let mut event = session.intent_event(
                &call.tool,
                &call.args,
                &call.params,
                Some(&held.evaluation),
                Stage::Held,
            );
            event.effects = Some(Effects {
                error: Some(why.clone()),
                ..Effects::default()
            });
            if let Err(e) = self.record(&held.key, &event) {
                warn(&format!(
                    "cancellation of `{}` not recorded: {e}",
                    call.tool
                ));
            }
            return Err(Refusal {
                code: code::REJECTED,
                message: format!("afr gateway: {why}"),
            });
        }
        let approval = HumanApproval {
            approver: ruling.approver.clone(),
            prompt: held.pending.prompt.clone(),
            decision: match ruling.decision {
                Decision::Approved => afr_core::event::Decision::Approved,
                Decision::Rejected => afr_core::event::Decision::Rejected,
            },
            decided_at_us: ruling.decided_at_us,
            signature: None,
        };
        if ruling.decision == Decision::Approved {
            let mut event = self.approved_event(session, call, &held.evaluation, Some(&approval));
            let signed = match &ruling.signature {
                Some(sig) => self.check_signature(&held, &mut event, sig),
                None if !held.evaluation.signed_by.is_empty() => Err(SignatureRefused::Unsigned {
                    approver: ruling.approver.clone(),
                    rule: held.evaluation.guardrail.clone(),
                    approvers: names(&held.evaluation),
                }),
                None => Ok(()),
            };
            // The event must still fit the recorder, with room for a result, now that it holds
            // the approval: else the call would run unrecorded.
            let signed = signed.and_then(|()| {
                let len = crate::session::json_len(&event);
                if len + MIN_RESULT_ROOM > afr_core::event::DEFAULT_MAX_EVENT_BYTES {
                    Err(SignatureRefused::TooLarge { bytes: len })
                } else {
                    Ok(())
                }
            });
            match signed {
                Ok(()) => {
                    // When it ran: now, as it is forwarded (an approval's validity window is
                    // checked against it).
                    event.timestamp_us = Some(now_us());
                    let record = CallRecord {
                        key: held.key.clone(),
                        event: Box::new(event),
                    };
                    let ticket = self.journal(&record);
                    self.settle_intent(&call.tool, &ticket)?;
                    return Ok(Forward { record, ticket });
                }
                Err(why) => {
                    return Err(self.refuse_signature(session, &held, &why.to_string()));
                }
            }
        }
        let why = match &ruling.reason {
            Some(r) => format!(
                "rejected by {}: {r}; not forwarded to the server",
                ruling.approver
            ),
            None => format!(
                "rejected by {}; not forwarded to the server",
                ruling.approver
            ),
        };
        if ruling.signature.is_some() {
            warn(&format!(
                "the signature on the rejection of `{}` was not recorded: the gateway records signed approvals only",
                call.tool
            ));
        }
        let stage = Stage::Decided {
            approval: &approval,
            approved: false,
            why: &why,
        };
        let event = session.intent_event(
            &call.tool,
            &call.args,
            &call.params,
            Some(&held.evaluation),
            stage,
        );
        if let Err(e) = self.record(&held.key, &event) {
            warn(&format!("rejection of `{}` not recorded: {e}", call.tool));
        }
        Err(Refusal {
            code: code::REJECTED,
            message: format!("afr gateway: {why}"),
        })
    }

    /// The event of `call` as recorded if it runs with `approval` (arguments capped as
    /// [`Gate::admit`] caps them).
    fn approved_event(
        &self,
        session: &Session,
        call: &ToolCall,
        evaluation: &Evaluation,
        approval: Option<&HumanApproval>,
    ) -> EventInput {
        let mut ev = session.intent_event(
            &call.tool,
            &call.args,
            &call.params,
            Some(evaluation),
            match approval {
                Some(approval) => Stage::Decided {
                    approval,
                    approved: true,
                    why: "",
                },
                // What an approval will sign: the event as it runs, before the decision.
                None => Stage::Forward,
            },
        );
        cap_arguments(&mut ev);
        ev
    }

    fn check_signature(
        &self,
        held: &Held,
        event: &mut EventInput,
        sig: &afr_core::event::ApprovalSignature,
    ) -> Result<(), SignatureRefused> {
        check_signed_approval(
            &self.dir,
            &held.evaluation,
            &held.pending.recorder,
            event,
            sig,
        )
    }

    /// Refuses `held` because its approval's signature does not hold (`why`): the call never
    /// runs, and its event records the refusal as the gateway's own `signed-approval` verdict.
    fn refuse_signature(&self, session: &Session, held: &Held, why: &str) -> Refusal {
        let call = &held.call;
        warn(&format!(
            "call of `{}` refused: its approval's signature does not hold: {why}",
            call.tool
        ));
        let message =
            format!("the approval's signature was refused ({why}); not forwarded to the server");
        let mut event = session.intent_event(
            &call.tool,
            &call.args,
            &call.params,
            Some(&held.evaluation),
            Stage::Held,
        );
        event.policy_evaluation.push(GuardrailEvaluation {
            guardrail: SIGNED_APPROVAL_GUARDRAIL.into(),
            version: Some(held.evaluation.version.clone()),
            verdict: GuardrailVerdict::Deny,
            reason: Some(why.to_owned()),
        });
        event.effects = Some(Effects {
            error: Some(message.clone()),
            ..Effects::default()
        });
        if let Err(e) = self.record(&held.key, &event) {
            warn(&format!("refusal of `{}` not recorded: {e}", call.tool));
        }
        Refusal {
            code: code::REJECTED,
            message: format!("afr gateway: {message}"),
        }
    }

    /// Removes this gateway's held calls from the queue and rejects them (it is stopping;
    /// they never ran).
    pub fn abandon_held(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        for id in self.held_ids().drain() {
            approvals::remove(&self.dir, &id);
        }
    }
}

/// Checks `sig` on the approval in `event`, a held call's event as it will run (escalated by
/// `e`, recorder `recorder_hex` = `0x` + 40 hex digits): bound to this event's intent and
/// execution, valid, by one of the rule's approvers (if it names any), unexpired now, its nonce
/// never used before by any producer of the store `dir` (claimed durably). On success the
/// signature goes into the event, with the approver's name from the policy. Shared by the MCP
/// gateway and the coding-agent hooks.
pub fn check_signed_approval(
    dir: &std::path::Path,
    e: &Evaluation,
    recorder_hex: &str,
    event: &mut EventInput,
    sig: &afr_core::event::ApprovalSignature,
) -> Result<(), SignatureRefused> {
    let approval = event
        .human_approval
        .as_mut()
        .ok_or(SignatureRefused::NoApproval)?;
    approval.signature = Some(sig.clone());
    event.validate().map_err(SignatureRefused::Malformed)?;
    let payload = event.clone().into_payload().1;
    let mut recorder = [0u8; 20];
    hex::decode_to_slice(recorder_hex.trim_start_matches("0x"), &mut recorder)
        .map_err(|_| SignatureRefused::NoRecorderId)?;
    let signed = match afr_core::approval::check(&payload, &recorder, now_us()) {
        Ok(Some(s)) => s,
        Ok(None) => return Err(SignatureRefused::NoSignature),
        Err(p) => {
            return Err(SignatureRefused::Check {
                check: p.check.to_string(),
                detail: p.detail,
            });
        }
    };
    if !e.signed_by.is_empty() {
        let Some(a) = e.signed_by.iter().find(|a| a.keys.contains(&signed.signer)) else {
            return Err(SignatureRefused::NotAnApprover {
                signer: signed.signer,
                rule: e.guardrail.clone(),
                approvers: names(e),
            });
        };
        if let Some(h) = event.human_approval.as_mut() {
            h.approver.clone_from(&a.name);
        }
    }
    // Durable and shared by every gateway of this recorder: a restarted `afr mcp wrap`
    // (every MCP client restart) must not run the same signed decision twice.
    match approvals::claim_nonce(dir, &signed.nonce) {
        Ok(true) => Ok(()),
        Ok(false) => Err(SignatureRefused::Replayed {
            nonce: signed.nonce,
        }),
        Err(e) => Err(SignatureRefused::NonceNotDurable(e)),
    }
}

/// Why the signature on an approval does not let its call run (recorded as the reason of the
/// gateway's `signed-approval` verdict).
#[derive(Debug, thiserror::Error)]
pub enum SignatureRefused {
    /// The rule requires a signature and the decision came without one.
    #[error(
        "the approval by {approver} is unsigned, and rule `{rule}` requires one signed by {approvers}"
    )]
    Unsigned {
        /// Who decided.
        approver: String,
        /// The rule.
        rule: String,
        /// Its approvers, by name.
        approvers: String,
    },
    /// The event holds no approval to sign (a gateway bug).
    #[error("the approved call has no approval")]
    NoApproval,
    /// The signature's fields break the event's limits.
    #[error("the signed approval is malformed: {0}")]
    Malformed(afr_core::event::InputError),
    /// The gateway cannot name the recorder the signature must be bound to.
    #[error("the gateway does not know its recorder's id")]
    NoRecorderId,
    /// The approval carries no signature after all.
    #[error("the approval carries no signature")]
    NoSignature,
    /// A check of `docs/spec/approvals.md` failed (binding, validity, signer).
    #[error("{check}: {detail}")]
    Check {
        /// The check.
        check: String,
        /// What failed.
        detail: String,
    },
    /// A valid signature by a key of none of the rule's approvers.
    #[error("signed by {signer}, who is none of the approvers of rule `{rule}` ({approvers})")]
    NotAnApprover {
        /// The signer.
        signer: String,
        /// The rule.
        rule: String,
        /// Its approvers, by name.
        approvers: String,
    },
    /// The approved call's event would be over the recorder's cap (with room for its result):
    /// it is not forwarded.
    #[error(
        "the approved call's event would be {bytes} bytes with its approval, too close to the recorder's cap of {} bytes; not forwarded",
        afr_core::event::DEFAULT_MAX_EVENT_BYTES
    )]
    TooLarge {
        /// The event's size as JSON.
        bytes: usize,
    },
    /// The statement's nonce was claimed before: a replay.
    #[error("the approval's nonce {nonce} was used before: a replayed approval")]
    Replayed {
        /// The nonce.
        nonce: String,
    },
    /// The nonce could not be claimed durably.
    #[error("the approval's nonce could not be claimed durably ({0}); not forwarded")]
    NonceNotDurable(approvals::QueueError),
}

/// Room an approved call's event must keep for its result under the recorder's cap.
pub const MIN_RESULT_ROOM: usize = 16 * 1024;

/// The guardrail under which the gateway records a refused approval signature.
pub const SIGNED_APPROVAL_GUARDRAIL: &str = "signed-approval";

fn names(e: &Evaluation) -> String {
    let n: Vec<&str> = e.signed_by.iter().map(|a| a.name.as_str()).collect();
    n.join(", ")
}

/// The arguments as an approver's prompt shows them: pretty-printed, or, past
/// [`MAX_PROMPT_ARGUMENTS`], their first part with their size and SHA-256 (`afr approve` shows
/// a held call's arguments whole, and checks that hash).
pub fn prompt_arguments(args: &Value) -> String {
    let pretty = serde_json::to_string_pretty(args).unwrap_or_default();
    if pretty.len() <= MAX_PROMPT_ARGUMENTS {
        return pretty;
    }
    let text = args.to_string();
    let mut cut = MAX_PROMPT_ARGUMENTS.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}… ({} bytes in all as JSON, {}; `afr approve` shows them whole)",
        text.get(..cut).unwrap_or_default(),
        text.len(),
        crate::session::sha256(text.as_bytes())
    )
}

/// Largest share of an approval prompt the arguments take (the prompt is recorded in the
/// event, beside the arguments themselves).
pub const MAX_PROMPT_ARGUMENTS: usize = 16 * 1024;

/// The text an approver is shown, in the queue and in an elicitation; recorded verbatim as
/// `human_approval.prompt`.
fn prompt(
    session: &Session,
    call: &ToolCall,
    e: &Evaluation,
    id: &str,
    timeout: Duration,
) -> String {
    let args = prompt_arguments(&call.args);
    let signed = if e.signed_by.is_empty() {
        String::new()
    } else {
        format!("\nneeds an approval signed by one of: {}", names(e))
    };
    format!(
        "Approve this tool call?\n\
         tool: {}\n\
         server: {}\n\
         arguments: {args}\n\
         policy rule: {} ({}){signed}\n\
         approval id: {id}; rejected unless decided within {} s",
        call.tool,
        session.target(),
        e.guardrail,
        e.reason.as_deref().unwrap_or("no reason given"),
        timeout.as_secs()
    )
}

/// The gateway's own `elicitation/create` request asking the client's user to decide on
/// `held` (2025-11-25 generation, form mode: one boolean).
pub fn elicitation_request(held: &Held) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": format!("{ELICITATION_ID_PREFIX}{}", held.pending.id),
        "method": "elicitation/create",
        "params": {
            "message": held.pending.prompt,
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "approve": {
                        "type": "boolean",
                        "title": "Approve",
                        "description": "Run this tool call",
                    },
                },
                "required": ["approve"],
            },
        },
    })
}

/// The decision a client's answer to [`elicitation_request`] carries: approved only for
/// `action: accept` with `approve: true`; anything else (decline, cancel, an error) rejects.
pub fn elicitation_ruling(answer: &Map<String, Value>, client: Option<&str>) -> Ruling {
    let result = answer.get("result");
    let action = result.and_then(|r| r.get("action")).and_then(Value::as_str);
    let approve = result
        .and_then(|r| r.pointer("/content/approve"))
        .and_then(Value::as_bool);
    let (decision, reason) = match (action, approve) {
        (Some("accept"), Some(true)) => (Decision::Approved, None),
        (Some("accept"), _) => (Decision::Rejected, Some("answered approve = false".into())),
        (Some(a), _) => (Decision::Rejected, Some(format!("the user chose `{a}`"))),
        (None, _) => (
            Decision::Rejected,
            Some("the client answered the elicitation with an error".into()),
        ),
    };
    Ruling {
        decision,
        // The gateway cannot authenticate the person behind the client: it names the client.
        approver: format!("user of MCP client {}", client.unwrap_or("(unnamed)")),
        decided_at_us: now_us(),
        reason,
        signature: None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn elicitation_answers() {
        let m = |v: Value| match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        };
        let yes = json!({"id": "afr-approval-1", "result": {"action": "accept", "content": {"approve": true}}});
        let r = elicitation_ruling(&m(yes), Some("claude"));
        assert_eq!(r.decision, Decision::Approved);
        assert_eq!(r.approver, "user of MCP client claude");
        for no in [
            json!({"result": {"action": "accept", "content": {"approve": false}}}),
            json!({"result": {"action": "decline"}}),
            json!({"result": {"action": "cancel"}}),
            json!({"error": {"code": -1, "message": "x"}}),
        ] {
            assert_eq!(
                elicitation_ruling(&m(no), None).decision,
                Decision::Rejected
            );
        }
    }
}
