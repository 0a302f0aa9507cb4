package gmailsettings

// examples are requests people make that each tool does (indexed by
// find_tools, never sent to the model).
var examples = map[string][]string{
	"gmail_list_filters":              {"what rules sort my incoming mail", "list the filters on my inbox"},
	"gmail_create_filter":             {"automatically label mail from my boss", "make a rule that skips the inbox for promotions", "auto forward invoices to the accountant"},
	"gmail_delete_filter":             {"remove the mail rule for promotions", "delete one of my gmail filters", "stop the automatic sorting rule"},
	"gmail_get_vacation":              {"is the auto reply turned on", "what does my away message say"},
	"gmail_set_vacation":              {"set an out of office while I travel", "turn the holiday autoreply on until the 20th", "disable my away message"},
	"gmail_get_signature":             {"what signature is at the bottom of my mail", "show the closing text of my emails"},
	"gmail_update_signature":          {"set my email signature to my name and phone", "change the sign off on my emails"},
	"gmail_list_forwarding_addresses": {"where can my email be forwarded", "which forwarding addresses are verified"},
}
