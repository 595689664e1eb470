//! Guest code that exchanges messages between the ranks of a job (`Send`, `Recv`).
//!
//! Each vCPU has a mailbox (`layout::mailbox_delivered`): per source rank, a count of the
//! messages delivered to it and a count of those it has received. Only counts travel: a
//! `Recv` from a rank takes that rank's next message, and messages between two ranks arrive
//! in order, so which message it is follows from the count (the simulator's mailboxes carry
//! their bytes only to time their transfer).
//!
//! - A send to a rank of the same VM raises the receiver's count with a locked add, as MPI's
//!   shared-memory transport writes the receiver's queue; if the receiver has halted (a
//!   blocking receive), the sender asks the host to wake it (`WAKE_ADDR`). The locked add
//!   orders the count before the read of the receiver's activity, and the receiver writes its
//!   activity before its halt's exit, after which the host reads the count: either the sender
//!   sees the halt, or the host sees the count, so no wake-up is lost.
//! - A send to a rank of another VM is an exit (`SEND_ADDR`) whose write carries the rank and
//!   the bytes. The host delivers it after the network's latency (`runner::messages`),
//!   raising the count in the receiver's memory and waking it if it halted.
//! - A receive waits until the count from its source exceeds what it has received, as its
//!   `wait` says (MPI's default is to poll: a spinning receive, in user mode, raising no
//!   pause-loop exits), then counts the message received.

use iced_x86::code_asm::*;
use vsched_model::BarrierWait;

use super::blocking::Until;
use super::{EmitError, Emitted, Emitter, Mailboxes};
use crate::guest_code::layout::*;

impl Emitter<'_> {
    fn mailboxes(&self) -> Result<Mailboxes, EmitError> {
        self.context.mailboxes.ok_or_else(|| EmitError::Malformed("a message without mailboxes".into()))
    }

    /// `Send { to, bytes }`: to a rank of this VM through its memory, to another VM's through
    /// the host. Clobbers `rax`, `rcx`.
    pub(super) fn send(&mut self, to: u32, bytes: u64) -> Emitted {
        let boxes = self.mailboxes()?;
        let to = u64::from(to);
        if to >= boxes.world {
            return Err(EmitError::Malformed(format!("a send to rank {to} of a job of {} ranks", boxes.world)));
        }
        let me = boxes.first_rank + self.context.own_index;
        if (boxes.first_rank..boxes.first_rank + boxes.ranks).contains(&to) {
            let local = to - boxes.first_rank;
            self.a.mov(rax, boxes.of(local) + mailbox_delivered(me))?;
            self.a.lock().add(dword_ptr(rax), 1)?;
            let mut awake = self.a.create_label();
            self.a.mov(rax, boxes.first_private + PRIVATE_SIZE * local + ACTIVITY)?;
            self.a.cmp(dword_ptr(rax), ACTIVITY_HALTED)?;
            self.a.jne(awake)?;
            self.wake_waiters()?;
            self.a.set_label(&mut awake)?;
            self.a.nop()?;
            return Ok(());
        }
        let Ok(bytes) = u32::try_from(bytes) else {
            return Err(EmitError::Malformed(format!("a message of {bytes} bytes (at most 4 GiB - 1)")));
        };
        self.a.mov(rax, (u64::from(bytes) << 32) | to)?;
        self.a.mov(ecx, SEND_ADDR as u32)?;
        self.a.mov(qword_ptr(rcx), rax)?;
        Ok(())
    }

    /// `Recv { from, wait }`: waits as `wait` says until a message from `from` has been
    /// delivered beyond those received, then receives it. Uses `rsi` (the count) and `edi`
    /// (the count to reach).
    pub(super) fn recv(&mut self, from: u32, wait: BarrierWait) -> Emitted {
        let boxes = self.mailboxes()?;
        let from = u64::from(from);
        if from >= boxes.world {
            return Err(EmitError::Malformed(format!("a receive from rank {from} of a job of {} ranks", boxes.world)));
        }
        self.set_activity(ACTIVITY_MESSAGE_WAIT)?;
        self.a.mov(rsi, boxes.of(self.context.own_index) + mailbox_delivered(from))?;
        let received = (mailbox_received(boxes.world, from) - mailbox_delivered(from)) as i32;
        self.a.mov(edi, dword_ptr(rsi + received))?;
        self.a.inc(edi)?;
        let mut passed = self.a.create_label();
        self.a.cmp(dword_ptr(rsi), edi)?;
        self.a.jae(passed)?;
        self.wait_until(Until::CountAt, wait, passed)?;
        self.a.set_label(&mut passed)?;
        self.a.mov(dword_ptr(rsi + received), edi)?;
        self.set_activity(ACTIVITY_COMPUTE)
    }
}
