package gmail

// examples are requests people make that each tool does (indexed by
// find_tools, never sent to the model).
var examples = map[string][]string{
	"gmail_search": {"unread mail from this week", "any messages from the airline", "did anyone write to me about the order", "emails from the school this month", "look for the mail with the tickets",
		"messages mentioning the deadline", "who sent me something about the meeting"},
	"gmail_read":  {"open that email and tell me what it says", "read the full message from the accountant", "what did the reply say"},
	"gmail_send":  {"email Sara that dinner is at eight", "send a message to the client with the quote", "write an email to support and send it"},
	"gmail_reply": {"answer the email from Pedro", "reply saying I can't come", "respond to the thread with a thank you"},
	"gmail_create_draft": {"write an email but keep it as a draft", "prepare a message for me to review before sending",
		"draft a reply to the invitation"},
	"gmail_send_draft":    {"the draft is fine, send it now", "send off the email I drafted", "deliver the saved draft"},
	"gmail_list_labels":   {"what labels are in my gmail", "list my mail folders", "which categories does my inbox use"},
	"gmail_modify_labels": {"label these emails as work", "mark the message read", "star this email", "remove the important label"},
	"gmail_archive":       {"archive the receipts", "take these emails out of the inbox without deleting", "tidy the inbox by archiving old mail"},
	"gmail_trash":         {"throw away that message", "bin the spam", "delete that junk mail", "trash the messages from the shop", "remove this email"},
}
