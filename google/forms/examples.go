package forms

// examples are requests people make that each tool does (indexed by
// find_tools, never sent to the model).
var examples = map[string][]string{
	"forms_create":        {"make a questionnaire for the event", "a form to collect sign ups", "create a google form", "make a poll for the party", "build a signup form"},
	"forms_read":          {"what questions does the form ask", "show the form"},
	"forms_add_questions": {"add questions to the form", "add a multiple choice question to the poll"},
	"forms_responses":     {"what did people answer in the form", "show the survey results", "list the form submissions"},
	"forms_response":      {"show one response to the form", "get a single submission by its id"},
}
