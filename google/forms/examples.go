package forms

// examples are requests people make that each tool does (indexed by
// find_tools, never sent to the model).
var examples = map[string][]string{
	"forms_create": {
		"make a questionnaire for the event",
		"a form to collect sign ups",
		"create a google form",
		"make a poll for the party",
		"build a signup form",
		"create a form",
		"make a survey",
		"new google form for feedback",
		"set up a signup sheet as a form",
		"build a quiz",
	},
	"forms_read": {
		"what questions does the form ask",
		"show the form",
		"show the questions of the form",
		"what's in the survey",
		"give me the link to the form",
		"read the form",
	},
	"forms_add_questions": {
		"add questions to the form",
		"add a multiple choice question to the poll",
		"add a question to the form",
		"put a rating scale in the survey",
		"add a dropdown question",
		"include a date question in the form",
		"add a checkbox question to the quiz",
	},
	"forms_responses": {
		"what did people answer in the form",
		"show the survey results",
		"list the form submissions",
		"show the responses",
		"what answers did the form get",
		"how many people replied to the survey",
		"list the submissions to the form",
		"the results of the poll",
	},
	"forms_response": {
		"show one response to the form",
		"get a single submission by its id",
		"show one response",
		"open a single submission",
		"what did that person answer in the form",
		"details of one survey reply",
	},
}
