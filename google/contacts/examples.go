package contacts

// examples are requests people make that each tool does (indexed by
// find_tools, never sent to the model).
var examples = map[string][]string{
	"contacts_search": {"do I have a contact at the insurance company", "number for the babysitter", "what's Pedro's number", "find the email address of my dentist", "look up a person in my contacts"},
	"contacts_list":   {"everyone I have in my contacts", "list everyone in my address book", "show all my contacts"},
	"contacts_get":    {"all the details of one contact", "show the full contact card for Ana"},
	"contacts_create": {"add a new contact with name and phone", "save Joana's number in my contacts", "create a contact for the plumber"},
	"contacts_update": {"change the phone number of a contact", "update the email address in someone's contact", "edit a contact's details"},
	"contacts_delete": {"delete a contact", "remove someone from my address book"},
	"contacts_groups": {"list my contact groups", "who is in the work label of my contacts"},
}
